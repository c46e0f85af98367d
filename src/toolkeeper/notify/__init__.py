"""Approval notifications: a person learns that a call waits for them wherever they are (ntfy,
email, Slack, Teams and what else Apprise reaches), with buttons that open the card or, with
direct decisions, decide through single-use links. An observer of the approval store's change
log, never in a call's path (``toolkeeper serve``'s ``[approval.notify]``; the ``notify``
extra)."""

from .channels import AppriseChannel, Channel, SendFailed, WebhookChannel, channel_for
from .compose import LINK_PATH, Composer
from .ledger import NotifyLedger, last_failure
from .links import DecisionLinks, Link
from .message import Button, Notice
from .notifier import Notifier
from .routing import Router
from .signing import sign, verify

__all__ = ["LINK_PATH", "AppriseChannel", "Button", "Channel", "Composer", "DecisionLinks",
           "Link", "Notice", "Notifier", "NotifyLedger", "Router", "SendFailed",
           "WebhookChannel", "channel_for", "last_failure", "sign", "verify"]
