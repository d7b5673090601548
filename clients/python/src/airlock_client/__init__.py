"""A Python client for Airlock's agent API (``airlockd`` on its Unix socket).

```python
from airlock_client import Client

with Client() as airlock:  # $AIRLOCK_SOCKET, else the default socket
    r = airlock.execute("await tools.everything.echo({ message: 'hi' })")
    print(r.status, r.result)
```

``Client`` blocks, ``AsyncClient`` has the same methods as coroutines. The typed answers are
in ``airlock_client.types``.
"""

from .client import AsyncClient, AsyncFix, AsyncToolHandler, Client, Fix, ToolHandler
from .errors import (
    AirlockApiError,
    AirlockConnectionError,
    AirlockError,
    AirlockProtocolError,
    AirlockTransportError,
)
from .socket_path import SYSTEM_SOCKET, default_socket_path, resolve_socket_path
from .types import (
    Attempt,
    ClientResult,
    ClientTool,
    Coercion,
    ConsoleEvent,
    Decision,
    Determinism,
    ExecutionError,
    ExecutionEvent,
    ExecutionResponse,
    ExecutionRow,
    ExecutionStats,
    PeerInfo,
    PendingApproval,
    PendingCall,
    ProgressEvent,
    Redaction,
    ResultEvent,
    RetryResult,
    SdkFile,
    SdkTree,
    SearchResult,
    SearchResults,
    SessionCall,
    SessionDetail,
    SessionInfo,
    StartedEvent,
    ToolCallFinishedEvent,
    ToolCallRecord,
    ToolCallStartedEvent,
    ToolDefinition,
    ToolError,
    ToolList,
    ToolProgressEvent,
    Unavailable,
    UnknownEvent,
    parse_event,
)

__version__ = "0.1.0"

__all__ = [
    "SYSTEM_SOCKET",
    "AirlockApiError",
    "AirlockConnectionError",
    "AirlockError",
    "AirlockProtocolError",
    "AirlockTransportError",
    "AsyncClient",
    "AsyncFix",
    "AsyncToolHandler",
    "Attempt",
    "Client",
    "ClientResult",
    "ClientTool",
    "Coercion",
    "ConsoleEvent",
    "Decision",
    "Determinism",
    "ExecutionError",
    "ExecutionEvent",
    "ExecutionResponse",
    "ExecutionRow",
    "ExecutionStats",
    "Fix",
    "PeerInfo",
    "PendingApproval",
    "PendingCall",
    "ProgressEvent",
    "Redaction",
    "ResultEvent",
    "RetryResult",
    "SdkFile",
    "SdkTree",
    "SearchResult",
    "SearchResults",
    "SessionCall",
    "SessionDetail",
    "SessionInfo",
    "StartedEvent",
    "ToolCallFinishedEvent",
    "ToolCallRecord",
    "ToolCallStartedEvent",
    "ToolDefinition",
    "ToolError",
    "ToolHandler",
    "ToolList",
    "ToolProgressEvent",
    "Unavailable",
    "UnknownEvent",
    "__version__",
    "default_socket_path",
    "parse_event",
    "resolve_socket_path",
]
