// Pieces every page uses: state badges, polling, errors, times and the live chart.
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";

const TONE = {
  RUNNING: "ok",
  PARKED: "parked",
  STARTING: "busy",
  RESTARTING: "warn",
  STOPPING: "busy",
  STOPPED: "off",
  SUSPENDED: "off",
  CREATED: "off",
  ERROR: "bad",
};

export function Badge({ state }) {
  return html`<span class="badge tone-${TONE[state] || "off"}" data-state=${state}>${state}</span>`;
}

// Call load() now and every `every` ms while mounted; returns [data, error, reload].
export function usePoll(load, deps, every = 0) {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  const alive = useRef(true);
  const run = async () => {
    try {
      const found = await load();
      if (alive.current) {
        setData(found);
        setError(null);
      }
    } catch (exc) {
      if (alive.current) setError(exc);
    }
  };
  useEffect(() => {
    alive.current = true;
    run();
    const timer = every ? setInterval(run, every) : null;
    return () => {
      alive.current = false;
      if (timer) clearInterval(timer);
    };
  }, deps);
  return [data, error, run];
}

export function ErrorNote({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">
    ${error.reason ? html`<code>${error.reason}</code> ` : ""}${error.message}
  </p>`;
}

export function when(ms) {
  if (!ms) return "never";
  const d = typeof ms === "number" ? new Date(ms) : new Date(ms);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function duration(seconds) {
  const s = Math.floor(seconds);
  const d = Math.floor(s / 86400);
  const hms = [Math.floor((s % 86400) / 3600), Math.floor((s % 3600) / 60), s % 60];
  return (d ? `${d}d ` : "") + hms.map((n) => String(n).padStart(2, "0")).join(":");
}

export function fmt(n, digits = 1) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  if (Math.abs(n) >= 1000) return Math.round(n).toLocaleString("en");
  if (Number.isInteger(n)) return String(n);
  return Math.abs(n) < 1 ? n.toPrecision(2) : n.toFixed(digits);
}

// A line chart of the last points: [{t, v}], drawn in SVG, no library.
export function Chart({ title, points, unit, testid, caption }) {
  const w = 320;
  const hgt = 96;
  const pad = 4;
  const values = points.map((p) => p.v);
  const max = Math.max(1e-9, ...values);
  const last = values.length ? values[values.length - 1] : null;
  const t0 = points.length ? points[0].t : 0;
  const t1 = points.length ? points[points.length - 1].t : 1;
  const x = (t) => pad + ((t - t0) / Math.max(1, t1 - t0)) * (w - 2 * pad);
  const y = (v) => hgt - pad - (v / max) * (hgt - 2 * pad);
  const line = points.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ");
  const area = points.length ? `${line} L${x(t1)},${hgt - pad} L${x(t0)},${hgt - pad} Z` : "";
  return html`<figure class="chart" data-testid=${testid} data-points=${points.length}>
    <figcaption>
      <span class="chart-title">${title}</span>
      <span class="chart-value" data-testid=${`${testid}-value`}>${fmt(last)} ${unit}</span>
    </figcaption>
    <svg viewBox="0 0 ${w} ${hgt}" role="img" aria-label="${title}: ${fmt(last)} ${unit}">
      <line x1="0" x2=${w} y1=${hgt - pad} y2=${hgt - pad} class="axis" />
      ${area && html`<path d=${area} class="area" />`}
      ${line && html`<path d=${line} class="line" />`}
      ${points.length > 1 && Math.max(...values) > 0 && html`<text x="2" y="11" class="max">${fmt(max)}</text>`}
    </svg>
    ${caption && html`<div class="chart-caption">${caption}</div>`}
  </figure>`;
}

export function Json({ value }) {
  return html`<pre class="json">${JSON.stringify(value, null, 2)}</pre>`;
}
