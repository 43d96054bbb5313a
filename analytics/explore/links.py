"""URLs between explorer pages (used in link columns).

Relative URLs resolve against the current page, so they work behind any host
and port; page url paths are fixed in ``app/streamlit_app.py``.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd

SESSION_PAGE = "session"


def session_url(session_id: str, msg_idx: int | None = None) -> str:
    """``session?session=…&msg=…`` — open the Session page at a message."""
    params: dict[str, str] = {"session": session_id}
    if msg_idx is not None and not pd.isna(msg_idx):
        params["msg"] = str(int(msg_idx))
    return f"{SESSION_PAGE}?{urlencode(params)}"


def with_session_links(
    df: pd.DataFrame, msg_col: str | None = "msg_idx", name: str = "open"
) -> pd.DataFrame:
    """Add a ``name`` column of Session-page URLs built from session_id (and ``msg_col``)."""
    out = df.copy()
    if out.empty:
        out[name] = pd.Series(dtype="object")
        return out
    msgs = out[msg_col] if msg_col else pd.Series([None] * len(out), index=out.index)
    out[name] = [session_url(s, m) for s, m in zip(out["session_id"], msgs, strict=True)]
    return out
