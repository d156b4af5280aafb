"""Wraps feature handlers so that one feature's exception is logged to the client, never fatal."""
from __future__ import annotations

import functools
import inspect
import logging
import traceback
from typing import Any, Callable

from lsprotocol import types

log = logging.getLogger(__name__)


def failsafe(server: Any, feature: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def report(exc: BaseException) -> None:
        log.exception("%s failed", feature)
        detail = "".join(traceback.format_exception(exc)[-3:])
        server.window_log_message(types.LogMessageParams(types.MessageType.Error,
                                                         f"Kernel Lens: {feature} failed: {detail}"))

    def wrap(handler: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(handler):
            @functools.wraps(handler)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await handler(*args, **kwargs)
                except Exception as exc:
                    report(exc)
                    return None
            return guarded_async

        @functools.wraps(handler)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return handler(*args, **kwargs)
            except Exception as exc:
                report(exc)
                return None
        return guarded
    return wrap
