"""A separate process for the restart tests: asks for approval and waits, or resumes.

    python approval_worker.py request DB LOG
    python approval_worker.py resume DB LOG APPROVAL_ID
"""

from __future__ import annotations

import json
import sys

import anyio

from toolkeeper import tool
from toolkeeper.approval import PersistedApprovalHandler, SqliteApprovalStore
from toolkeeper.invoke import ToolCall, ToolInvoker
from toolkeeper.toolbox import Toolbox


def main() -> None:
    mode, db, log = sys.argv[1], sys.argv[2], sys.argv[3]

    @tool(risk="critical")
    def wire_money(amount: int, to: str) -> str:
        """Send money."""
        with open(log, "a") as out:
            out.write(f"{amount}->{to}\n")
        return f"sent {amount} to {to}"

    store = SqliteApprovalStore(db)
    invoker = ToolInvoker(Toolbox([wire_money]), PersistedApprovalHandler(store, wait_s=50))

    async def run() -> None:
        async with invoker.open_session() as session:
            if mode == "request":
                call = ToolCall(id="call-1", name="wire_money", arguments={"amount": 42, "to": "ann"})
                result = await invoker.invoke(call, session=session)
            else:
                result = await invoker.resume(sys.argv[4], session=session)
        print(json.dumps({"status": result.status, "code": result.error_code, "text": result.text}),
              flush=True)

    anyio.run(run)


if __name__ == "__main__":
    main()
