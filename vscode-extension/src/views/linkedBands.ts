/** Compiler-Explorer-style bands between a user file and its generated code: which lines of the other side a
 * line is linked to, and each band's colour. Pure (no `vscode` import) so unit tests read it directly. */

import { LinkedLines } from "../common/protocol";

/** Band colours: translucent, distinguishable on light and dark themes; bands cycle through them. */
export const BAND_COLOURS = [
  "rgba(255, 179, 71, 0.22)",
  "rgba(119, 221, 119, 0.22)",
  "rgba(132, 182, 244, 0.24)",
  "rgba(253, 253, 150, 0.26)",
  "rgba(255, 105, 97, 0.20)",
  "rgba(203, 153, 201, 0.24)",
];

export type Side = "source" | "generated";

export interface LinkTarget {
  band: number;
  /** 0-based lines on the other side. */
  lines: number[];
}

/** Lines of each side keyed by line, for lookups on every cursor move (constant time). */
export class LinkIndex {
  private readonly fromSource = new Map<number, LinkTarget>();
  private readonly fromGenerated = new Map<number, LinkTarget>();

  constructor(readonly linked: LinkedLines) {
    for (const link of linked.links) {
      this.fromSource.set(link.source_line, { band: link.band, lines: [...link.generated_lines] });
      for (const line of link.generated_lines) {
        const known = this.fromGenerated.get(line);
        if (known) {
          known.lines.push(link.source_line);
        } else {
          this.fromGenerated.set(line, { band: link.band, lines: [link.source_line] });
        }
      }
    }
  }

  /** The other side's lines linked to `line` of `side`, or undefined when it has none. */
  targets(side: Side, line: number): LinkTarget | undefined {
    return (side === "source" ? this.fromSource : this.fromGenerated).get(line);
  }

  /** Lines of `side` grouped by colour index (band modulo the palette). */
  linesByColour(side: Side): number[][] {
    const groups: number[][] = BAND_COLOURS.map(() => []);
    for (const link of this.linked.links) {
      const colour = link.band % BAND_COLOURS.length;
      groups[colour].push(...(side === "source" ? [link.source_line] : link.generated_lines));
    }
    return groups;
  }
}

/** "foo1.py:5" for the label beside a linked line (1-based for people). */
export function lineLabel(uri: string, line: number): string {
  const file = decodeURIComponent(uri.split("/").pop() ?? uri);
  return `${file}:${line + 1}`;
}

