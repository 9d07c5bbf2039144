"""A session: one conversation's append-only log, the projection the model is sent, and the
frozen snapshot a compaction run reads."""

from ctxfold.session.async_session import AsyncSession
from ctxfold.session.projection import Item, Projection
from ctxfold.session.session import Session
from ctxfold.session.snapshot import Snapshot

__all__ = ["AsyncSession", "Item", "Projection", "Session", "Snapshot"]
