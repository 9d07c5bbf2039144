"""Recall: bring back the original messages a session's view no longer shows.

Every note, placeholder and summary ctxfold writes says where its originals are in the log; recall
reads them back, by that reference (`parse_ref` reads every form ctxfold prints) or by full-text
search over exactly what is out of view. Results are framed as quoted data and bounded in tokens.
`Session.recall` and `Session.call_recall` are the entry points; `recall_tool` gives the schema a
model needs to call it.
"""

from ctxfold.session.recall.core import DEFAULT_MAX_TOKENS, Recalled, Recaller
from ctxfold.session.recall.outofview import Fates, OutOfView
from ctxfold.session.recall.refs import parse_ref
from ctxfold.session.recall.tool import Recall, read_arguments, recall_tool

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "Fates",
    "OutOfView",
    "Recall",
    "Recalled",
    "Recaller",
    "parse_ref",
    "read_arguments",
    "recall_tool",
]
