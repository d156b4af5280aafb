/** Heat levels for the cost gutter: a line's share of the profiled time against the costliest line of its
 * file, in five steps, and the gutter mark drawn for each. Pure (no `vscode` import). */

import { LineCosts } from "../common/protocol";

/** From cool to hot; a line with no measured share gets no mark. */
export const HEAT_COLOURS = ["#4f7cac", "#7a9e3f", "#d6b83a", "#e07b39", "#d64541"];

/** 0 (coolest) .. HEAT_COLOURS.length - 1 (the costliest line of the file). */
export function heatLevel(percent: number, hottest: number): number {
  if (!(hottest > 0) || !(percent > 0)) {
    return 0;
  }
  const level = Math.ceil((percent / hottest) * HEAT_COLOURS.length) - 1;
  return Math.max(0, Math.min(HEAT_COLOURS.length - 1, level));
}

/** 0-based lines per heat level. */
export function linesByHeat(costs: LineCosts): number[][] {
  const levels: number[][] = HEAT_COLOURS.map(() => []);
  const hottest = Math.max(0, ...costs.lines.map((entry) => entry.percent ?? 0));
  for (const entry of costs.lines) {
    if (entry.percent !== null && entry.percent > 0) {
      levels[heatLevel(entry.percent, hottest)].push(entry.line);
    }
  }
  return levels;
}

/** A gutter mark: a bar of the level's colour, as an SVG data URI. */
export function heatMarkUri(colour: string): string {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="8" height="20"><rect x="2" width="5" height="20" fill="${colour}"/></svg>`;
  return `data:image/svg+xml;base64,${Buffer.from(svg).toString("base64")}`;
}

/** The hover over the gutter mark: what the number measures. */
export function heatMessage(entry: LineCosts["lines"][number]): string {
  const parts = entry.kernels.map((k) => {
    const share = k.percent === null ? "" : ` ${k.percent.toFixed(1)}%`;
    const split = k.lines_sharing > 1 ? ` (its time split over ${k.lines_sharing} lines)` : "";
    return `\`${k.name}\`${share}${split}`;
  });
  const ms = entry.ms === null ? "" : ` · ${entry.ms < 0.01 ? `${(entry.ms * 1000).toFixed(2)} µs` : `${entry.ms.toFixed(3)} ms`} per iteration`;
  return `Kernel Lens: ${(entry.percent ?? 0).toFixed(1)}% of the profiled iteration${ms} — ${parts.join(", ")}`;
}
