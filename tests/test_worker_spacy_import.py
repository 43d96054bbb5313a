"""The tagging worker imports spaCy without its command line, and tags all the same."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

TAGS = textwrap.dedent(
    """
    from analytics.analysis.tagging import Tagger
    from analytics.models import Message, MessageContext
    texts = ["ok?", "The root cause is the OOM: the KV cache takes 95% of memory.",
             "It's up! The server is ready.", "ready?"]
    ctxs = [MessageContext(message=Message(session_id="s", msg_idx=i, source_id=str(i),
            role="user" if i % 3 == 0 else "assistant", text=t)) for i, t in enumerate(texts)]
    out["tags"] = sorted((t.msg_idx, t.tag) for t in Tagger().tag(ctxs))
    """
)
WORKER_WAY = textwrap.dedent(
    """
    import sys
    from analytics.analysis.tagging.worker import _import_spacy_without_cli
    _import_spacy_without_cli()
    out = {"skipped": "spacy.cli" not in sys.modules and "requests" not in sys.modules}
    """
) + TAGS + "import spacy\nout['info'] = 'spacy_version' in spacy.info()\n"
USUAL_WAY = "import spacy\nout = {}\n" + TAGS


def _run(code: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", code + "import json\nprint(json.dumps(out))\n"],
        capture_output=True, text=True, check=True,
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_spacy_without_its_command_line_tags_the_same() -> None:
    """In a fresh process: spaCy imported the worker's way leaves ``spacy.cli`` (and the
    ``requests`` it pulls in) unimported, the Tagger gives the tags it gives in a process
    that imported spaCy the usual way, and ``spacy.info`` still reaches the real one."""
    worker_way, usual = _run(WORKER_WAY), _run(USUAL_WAY)
    assert worker_way["skipped"] and worker_way["info"]
    assert worker_way["tags"] == usual["tags"] and usual["tags"]
