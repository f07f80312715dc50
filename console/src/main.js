// The sparkfn console: a single page over the worker's REST API, routed by the URL's hash.
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { request, setToken, token, tokenError, tokenNeeded } from "./api.js";
import { html } from "./html.js";
import { useSignal } from "./signal.js";
import { FunctionList } from "./pages/functions.js";
import { FunctionPage } from "./pages/function.js";
import { SubmitPage } from "./pages/submit.js";
import { TopicList, TopicPage } from "./pages/topics.js";
import { WorkerPage } from "./pages/worker.js";
import "./style.css";

function useHash() {
  const [hash, setHash] = useState(location.hash || "#/functions");
  useEffect(() => {
    const changed = () => setHash(location.hash || "#/functions");
    addEventListener("hashchange", changed);
    return () => removeEventListener("hashchange", changed);
  }, []);
  return hash;
}

const NAV = [
  ["#/functions", "Functions", "f"],
  ["#/new", "New function", "n"],
  ["#/topics", "Topics", "t"],
  ["#/worker", "Worker", "w"],
];

function route(hash) {
  const parts = hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const [page, ...rest] = parts;
  // Keyed by what they show: another function or topic starts from a fresh page, no state kept.
  const key = rest.join("/");
  if (page === "functions" && rest.length === 3) return html`<${FunctionPage} key=${key} fqfn=${key} />`;
  if (page === "update" && rest.length === 3) return html`<${SubmitPage} key=${key} fqfn=${key} />`;
  if (page === "new") return html`<${SubmitPage} key="new" />`;
  if (page === "topics" && rest.length === 3) return html`<${TopicPage} key=${key} parts=${rest} />`;
  if (page === "topics") return html`<${TopicList} />`;
  if (page === "worker") return html`<${WorkerPage} />`;
  return html`<${FunctionList} />`;
}

function typing(event) {
  const el = event.target;
  return el && (el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName));
}

function Shortcuts() {
  useEffect(() => {
    const key = (event) => {
      if (event.ctrlKey || event.metaKey || event.altKey || typing(event)) return;
      if (event.key === "/") {
        const search = document.querySelector("[data-search]");
        if (search) {
          event.preventDefault();
          search.focus();
        }
        return;
      }
      if (event.key === "?") {
        document.getElementById("shortcuts")?.toggleAttribute("open");
        return;
      }
      const found = NAV.find(([, , k]) => k === event.key);
      if (found) location.hash = found[0];
    };
    addEventListener("keydown", key);
    return () => removeEventListener("keydown", key);
  }, []);
  return html`<details id="shortcuts" class="shortcuts">
    <summary>Keyboard</summary>
    <dl>
      <dt><kbd>/</kbd></dt><dd>search</dd>
      ${NAV.map(([, label, k]) => html`<dt><kbd>${k}</kbd></dt><dd>${label}</dd>`)}
      <dt><kbd>Tab</kbd></dt><dd>next control</dd>
      <dt><kbd>?</kbd></dt><dd>this list</dd>
    </dl>
  </details>`;
}

function TokenPrompt() {
  const error = useSignal(tokenError);
  const [value, setValue] = useState("");
  const [checking, setChecking] = useState(false);
  const input = useRef(null);
  useEffect(() => input.current?.focus(), []);
  const submit = async (event) => {
    event.preventDefault();
    setChecking(true);
    setToken(value.trim());
    try {
      await request("GET", "/ready", undefined, { raw: true }).catch((exc) => {
        if (exc.status === 401) throw exc; // 503 (not ready) still means the token is good
      });
      tokenError.set("");
      tokenNeeded.set(false);
    } catch {
      setToken("");
    } finally {
      setChecking(false);
    }
  };
  return html`<div class="token-screen">
    <form class="card token-card" onSubmit=${submit} aria-labelledby="token-title">
      <h1 id="token-title">This worker asks for a token</h1>
      <p class="muted">
        Auth is on: paste a token from <code>sparkfn tokens create</code>. It is kept in this tab only.
      </p>
      <label for="token">Token</label>
      <textarea id="token" ref=${input} rows="4" value=${value} required spellcheck=${false} autocomplete="off"
        onInput=${(e) => setValue(e.target.value)}></textarea>
      ${error && html`<p class="error" role="alert" data-testid="token-error">${error}</p>`}
      <button type="submit" class="primary" disabled=${checking}>Sign in</button>
    </form>
  </div>`;
}

function App() {
  const hash = useHash();
  const needToken = useSignal(tokenNeeded);
  if (needToken) return html`<${TokenPrompt} />`;
  const section = hash.split("/")[1] || "functions";
  const active = (target) =>
    target.split("/")[1] === section || (section === "update" && target === "#/new");
  return html`<div class="shell">
    <a class="skip" href="#main" onClick=${(e) => { e.preventDefault(); document.getElementById("main").focus(); }}>Skip to content</a>
    <header class="top">
      <a class="brand" href="#/functions"><span class="logo" aria-hidden="true">ϟ</span> sparkfn</a>
      <nav aria-label="Sections">
        ${NAV.map(
          ([target, label, k]) => html`<a href=${target} aria-current=${active(target) ? "page" : undefined}
            aria-keyshortcuts=${k}>${label}</a>`,
        )}
      </nav>
      <div class="spacer"></div>
      <${Shortcuts} />
      ${token() && html`<button class="ghost" onClick=${() => { setToken(""); tokenError.set(""); tokenNeeded.set(true); }}
        title="Forget the token">Sign out</button>`}
    </header>
    <main id="main" tabindex="-1">${route(hash)}</main>
  </div>`;
}

render(html`<${App} />`, document.getElementById("app"));
