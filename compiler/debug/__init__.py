"""Every writer of the debug directory (docs/debug-directory.md): the folder and its files (`directory`), the FX graph as
text (`graph_source`), the kernel map, the mapped compile error and the standalone repro code."""
