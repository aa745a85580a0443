"""A MySQL connection in memory for unit tests of code that asks the server questions: each
statement's rows are what ``answer(sql, args)`` returns (an exception it raises, the server's)."""
from typing import Any, Callable, List, Optional, Sequence


class FakeConnection:
    def __init__(self, answer: Callable[[str, Any], Sequence[Sequence[Any]]],
                 server_info: str = "10.11.19-MariaDB") -> None:
        self.answer = answer
        self.server_info = server_info
        self.ran: List[str] = []

    def get_server_info(self) -> str:
        return self.server_info

    def escape(self, value: Any) -> str:
        return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"

    def cursor(self) -> "_Cursor":
        return _Cursor(self)


class _Cursor:
    def __init__(self, conn: FakeConnection) -> None:
        self.conn = conn
        self.rows: List[Sequence[Any]] = []

    def __enter__(self) -> "_Cursor":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def execute(self, sql: str, args: Any = None) -> int:
        self.rows = list(self.conn.answer(sql, args))
        self.conn.ran.append(sql)
        return len(self.rows)

    def fetchone(self) -> Optional[Sequence[Any]]:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> List[Sequence[Any]]:
        return self.rows
