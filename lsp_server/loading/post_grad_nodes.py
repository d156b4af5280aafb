"""The nodes only Inductor's post-grad graph has (a decomposition's or a pattern replacement's: an online
softmax's `prepare_softmax_online_default`, `sub_tensor`, `exp_default`…): kernels, provenance and `# Graph
fragment:` comments name them, `fx_graph_readable.py` (the graph before the post-grad passes) does not. They join
the graph's node table from `fx_graph_transformed.py` (with their line there), else from the kernels' `# Graph
fragment:` comments of output_code.py (a run whose folder lacks the post-grad graph), and their source line: their own
`# File:` comment, else that of the readable nodes made from the same pre-grad node (the provenance's
postToPre/preToPost), else the one line all the nodes reading them have (a decomposition's intermediate feeds
only the rest of that decomposition: `sub_tensor_1` → `exp_default_1` → the softmax's `div`); else none.
"""
from __future__ import annotations

from lsp_server.model import (
    TRANSFORMED_GRAPH,
    FxNode,
    Graph,
    SourceLocation,
    normalize_path,
)
from lsp_server.parsers.fx_graph_readable import ReadableGraph
from lsp_server.parsers.output_code import FragmentNode
from lsp_server.parsers.provenance import ProvenanceMap


def add_post_grad_nodes(graph: Graph, transformed: ReadableGraph | None, fragments: list[FragmentNode],
                        provenance: ProvenanceMap | None) -> None:
    added: list[FxNode] = []
    reads: dict[str, list[str]] = {}  # node -> what it reads in the post-grad graph, as it runs
    for read in transformed.nodes if transformed is not None else ():
        reads[read.name] = read.args
        if read.name in graph.nodes:
            continue
        frames = [SourceLocation(normalize_path(f.file), f.line, f.function, f.code) for f in read.frames]
        node = FxNode(read.name, read.target, read.line, frames[-1] if frames else None, frames, read.args,
                      TRANSFORMED_GRAPH)
        graph.nodes[read.name] = node
        added.append(node)
    for fragment in fragments:
        reads.setdefault(fragment.name, list(fragment.args))
        if fragment.name not in graph.nodes:  # no statement line: only the kernel's comment has it
            node = graph.nodes[fragment.name] = FxNode(fragment.name, fragment.target, None, None, [],
                                                       list(fragment.args), TRANSFORMED_GRAPH)
            added.append(node)
    for node in added:
        if node.source is None and provenance is not None:
            node.source = pre_grad_source(graph, provenance, node.name)
    for node in reversed(added):  # users first: an intermediate's users may be post-grad nodes themselves
        if node.source is None:
            node.source = users_source(graph, reads, node.name)
    for node in added:
        if node.source is not None and not node.frames:
            node.frames = [node.source]


def pre_grad_source(graph: Graph, provenance: ProvenanceMap, name: str) -> SourceLocation | None:
    """The source of a readable node made from the same pre-grad (Dynamo) node as post-grad node `name`."""
    for pre in provenance.post_to_pre.get(name, []):
        for post in provenance.pre_to_post.get(pre, []):
            node = graph.nodes.get(post)
            if node is not None and node.graph_file != TRANSFORMED_GRAPH and node.source is not None:
                return node.source
    return None


def users_source(graph: Graph, reads: dict[str, list[str]], name: str) -> SourceLocation | None:
    """The one source line all the post-grad nodes reading `name` have (a tuple's parts `getitem_2 = node[0]`
    included); None where they disagree, where one has none, or where nothing reads it."""
    users = [graph.nodes[user] for user, args in reads.items() if name in args and user in graph.nodes]
    sources = {(n.source.file, n.source.line): n.source for n in users if n.source is not None}
    return next(iter(sources.values())) if len(sources) == 1 and all(n.source for n in users) else None
