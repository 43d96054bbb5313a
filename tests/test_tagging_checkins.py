"""Check-ins the tagger used to miss: Chinese asks without a question mark, Korean and
Japanese ones, an ask followed by an impatient remark; and the ``anchors`` a prose rule names
for the prefilter when its pattern gives it nothing to look for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _tagging import context, tag_names

from analytics.analysis.tagging import RuleError, Tagger


@pytest.fixture(scope="module")
def tagger() -> Tagger:
    return Tagger(diagnosis_model=None)


def table(positives: list[str], negatives: list[str]) -> list[object]:
    return [pytest.param(t, True, id=f"+{i}") for i, t in enumerate(positives)] + [
        pytest.param(t, False, id=f"-{i}") for i, t in enumerate(negatives)
    ]


def is_checkin(tagger: Tagger, text: str) -> bool:
    return "user_checkin" in tag_names(tagger, context("user", text))


@pytest.mark.parametrize("text,expected", table(
    ["部署好了吗", "还在跑吗", "服务起来了吗", "好了没", "进度呢", "服务器还活着吗", "还没好吗", "在吗",
     "结果呢", "还在跑吗?", "进度呢？", "部署好了吗？", "训练进度呢", "跑得怎么样了", "完成没",
     "好没好", "部署好没好？", "服务起没起来", "跑没跑完", "服务起来没", "好了没呀", "好没好啊"],
    ["部署好了吗？好了就跑benchmark", "还在跑吗？如果没有就重启", "重启一下", "好的", "你能把端口改成8000吗",
     "能重启吗", "可以帮我重启服务器吗", "为什么吞吐这么低呢", "进度呢，另外把日志发给我", "好啊", "行啊",
     "好的呀", "好没好？好了就跑benchmark"],
))
def test_chinese_asks_without_question_mark(tagger: Tagger, text: str, expected: bool) -> None:
    """Short Chinese asks end in a particle rather than "?": a finished state (了吗, 了没), a
    state asked as "A or not A" (好没好, 起没起来), a state that goes on (还在…吗, 还活着吗)
    or a status noun with 呢 (进度呢), maybe softened (好了没呀). A request ending in 吗
    (能重启吗 "can you restart it?"), a why-question, an approval (好啊 "OK!") and an ask with
    an instruction are none."""
    assert is_checkin(tagger, text) is expected


@pytest.mark.parametrize("text,expected", table(
    ["준비됐어?", "다 됐어?", "상태는?", "서버 떴어?", "아직이야?", "진행 상황은?", "준비됐나요?",
     "終わった？", "まだ？", "準備できた？", "進捗は？", "状況は？", "終わりましたか", "まだですか？",
     "もう終わった？", "サーバー起動した？", "ベンチの結果は？"],
    ["다시 시작해", "네 진행해", "준비됐어? 그럼 벤치마크 돌려", "상태 확인해줘", "再起動して",
     "進捗を確認して", "はい、進めて", "終わった？じゃあベンチマークを回して", "量子化はどう？", "これは何ですか？",
     "終わった"],
))
def test_korean_and_japanese_asks(tagger: Tagger, text: str, expected: bool) -> None:
    """"ready?", "status?", "not yet?" in Korean and Japanese (a topic particle with "?" asks
    "what about …": 상태는?, 進捗は？; polite か asks without "?"; Japanese, like Chinese, glues
    the subject on: サーバー起動した？). Orders, approvals, "how about quantization?" and a
    statement ("finished") are none."""
    assert is_checkin(tagger, text) is expected


@pytest.mark.parametrize("text,expected", table(
    ["is it up? you've been waiting forever", "ready? it's been 20 minutes", "status? this is taking ages",
     "any luck? this is taking forever", "ok? this is so slow", "is it up yet? come on",
     "what's taking so long?", "still running? i've been waiting 20 minutes", "done? 🙏"],
    ["is it up? if not, restart it", "ready? then run the benchmark", "done? run the tests",
     "status? this is taking ages, kill it", "ready? the benchmark next", "this is taking ages",
     "come on, run the benchmark"],
))
def test_ask_then_impatient_remark(tagger: Tagger, text: str, expected: bool) -> None:
    """After the ask's question mark an impatient remark keeps it a check-in; anything else
    there, even words that may stand beside an ask ("the benchmark", "run"), asks for work.
    A remark without an ask is none."""
    assert is_checkin(tagger, text) is expected


def test_every_chinese_ask_ending_holds_an_anchor() -> None:
    """The Chinese ask's rule is prefiltered on its anchors: each ending the attribute asks
    with must hold one, or messages ending so would never reach the rule."""
    from analytics.analysis.tagging.components import PATTERNS_DIR, lexicon, read_jsonl

    [rule] = [r for r in read_jsonl(PATTERNS_DIR / "prose.jsonl") if r.get("id") == "checkin:cjk-ask"]
    lex = lexicon()
    for ending in lex["checkin_cjk_ask_ending"] | lex["checkin_cjk_particle"]:
        assert any(a in ending for a in rule["anchors"]), ending


def test_chinese_ask_is_found_by_its_particle(tagger: Tagger) -> None:
    """The Chinese ask's rule is a token attribute, which the prefilter cannot read: its
    particles, declared as anchors, make the message a candidate, and a message without one
    is not tokenised for it."""
    assert tagger._find_regions("user", "部署好了吗") == [(0, 5)]
    assert tagger._find_regions("user", "重启一下") == []


def test_rule_anchors_prefilter_a_custom_rule(tmp_path: Path) -> None:
    """A custom rule the prefilter cannot read (REGEX) runs on every message unless it names
    its anchors; with them it runs where one occurs, and finds what it found before."""
    rule = {"label": "ticket", "roles": ["user"], "pattern": [{"TEXT": {"REGEX": "^JIRA-[0-9]+$"}}]}
    plain, anchored = tmp_path / "plain.jsonl", tmp_path / "anchored.jsonl"
    plain.write_text(json.dumps(rule) + "\n")
    anchored.write_text(json.dumps({**rule, "anchors": ["JIRA-"]}) + "\n")
    text, other = "blocked on JIRA-123 for now, it will take a while", "the weather is nice today, it will take a while"
    for rules in (plain, anchored):
        assert "ticket" in tag_names(Tagger(extra_rules=rules, diagnosis_model=None), context("user", text))
    assert Tagger(extra_rules=plain, diagnosis_model=None)._find_regions("user", other) == [(0, len(other))]
    assert Tagger(extra_rules=anchored, diagnosis_model=None)._find_regions("user", other) == []


@pytest.mark.parametrize("anchors", [[], "吗", [""], [1]])
def test_bad_anchors_name_the_problem(tmp_path: Path, anchors: object) -> None:
    rules = tmp_path / "bad.jsonl"
    rules.write_text(json.dumps({"label": "a", "pattern": [{"LOWER": "x"}], "anchors": anchors}) + "\n")
    with pytest.raises(RuleError, match="anchors"):
        Tagger(extra_rules=rules, diagnosis_model=None)
