"""The ground floor: frozen data and protocols every other room builds on, importing nothing
above it — a call, a result and its content blocks, risk and HITL modes, tool metadata, the
call context, and the tool spec with the protocol every kind of tool meets."""
