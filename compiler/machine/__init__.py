"""The machine side: g++ builds (cached, in parts, with a precompiled prelude), loading, and what generated code
calls at run time (buffer pool, matrix products, kernel timing). Imports neither the frontend nor the tools."""
