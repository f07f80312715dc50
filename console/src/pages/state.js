// A function's state: read a key (text, bytes or counter) and put one, through the REST API.
import { useState } from "preact/hooks";
import { fnPath, get, post } from "../api.js";
import { ErrorNote } from "../common.js";
import { html } from "../html.js";

export function hex(base64) {
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ");
}

function Value({ value }) {
  if (value.numberValue !== null && value.numberValue !== undefined)
    return html`<p><span class="muted">counter</span> <strong data-testid="state-value">${value.numberValue}</strong></p>`;
  if (value.stringValue !== null && value.stringValue !== undefined)
    return html`<p><span class="muted">text</span></p><pre data-testid="state-value">${value.stringValue}</pre>`;
  if (value.byteValue) return html`<p><span class="muted">bytes (hex)</span></p><pre data-testid="state-value">${hex(value.byteValue)}</pre>`;
  return html`<p class="muted" data-testid="state-value">(empty)</p>`;
}

export function StateBrowser({ fqfn }) {
  const [key, setKey] = useState("");
  const [found, setFound] = useState(null);
  const [error, setError] = useState(null);
  const [putKey, setPutKey] = useState("");
  const [putValue, setPutValue] = useState("");
  const [kind, setKind] = useState("text");
  const [saved, setSaved] = useState("");
  const read = async (event) => {
    event.preventDefault();
    setError(null);
    setFound(null);
    try {
      setFound(await get(`${fnPath(fqfn)}/state/${encodeURIComponent(key)}`));
    } catch (exc) {
      setError(exc);
    }
  };
  const write = async (event) => {
    event.preventDefault();
    setError(null);
    setSaved("");
    const state = { key: putKey };
    if (kind === "counter") {
      if (!/^-?\d+$/.test(putValue.trim())) {
        setError({ reason: "invalid_request", message: `a counter is a whole number; got ${JSON.stringify(putValue)}` });
        return;
      }
      state.numberValue = Number(putValue.trim());
    } else state.stringValue = putValue;
    const body = new FormData();
    body.set("state", JSON.stringify(state));
    try {
      await post(`${fnPath(fqfn)}/state/${encodeURIComponent(putKey)}`, body);
      setSaved(`${putKey} saved`);
    } catch (exc) {
      setError(exc);
    }
  };
  return html`<section class="card" aria-labelledby="state-title">
    <h2 id="state-title">State</h2>
    <form class="inline" onSubmit=${read}>
      <label for="state-key">Key</label>
      <input id="state-key" value=${key} required onInput=${(e) => setKey(e.target.value)} />
      <button type="submit">Get</button>
    </form>
    ${found && html`<div class="state-value">${html`<${Value} value=${found} />`}</div>`}
    <form class="inline" onSubmit=${write}>
      <label for="put-key">Key</label>
      <input id="put-key" value=${putKey} required onInput=${(e) => setPutKey(e.target.value)} />
      <label for="put-kind" class="sr-only">Kind</label>
      <select id="put-kind" value=${kind} onChange=${(e) => setKind(e.target.value)}>
        <option value="text">text</option><option value="counter">counter</option>
      </select>
      <label for="put-value">Value</label>
      <input id="put-value" value=${putValue} onInput=${(e) => setPutValue(e.target.value)} />
      <button type="submit">Put</button>
    </form>
    ${saved && html`<p class="muted small" role="status">${saved}</p>`}
    <${ErrorNote} error=${error} />
  </section>`;
}
