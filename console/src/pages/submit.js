// Create a function from an uploaded package, or update one: a form checked as the CLI checks
// a config before it uploads anything; what needs the worker (topics, code) the worker checks.
import { useEffect, useState } from "preact/hooks";
import { field, fnPath, get, request } from "../api.js";
import { ErrorNote } from "../common.js";
import { html } from "../html.js";

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$/;
const KINDS = [".py", ".zip", ".whl"];
const NAME_RULE = "letters, digits, '_', '-', '.', starting with a letter or digit, at most 128 characters";

function topicProblem(fieldName, text) {
  const bare = text.replace(/^(non-)?persistent:\/\//, "");
  const parts = bare.split("/");
  if (parts.length !== 1 && parts.length !== 3)
    return `${fieldName} ${q(text)}: a topic is name or tenant/namespace/name`;
  for (const part of parts)
    if (!NAME.test(part)) return `${fieldName} ${q(text)}: ${q(part)} is not a valid name (${NAME_RULE})`;
  return null;
}

// Python's repr of a string, as the CLI's messages quote values.
const q = (s) => (String(s).includes("'") && !String(s).includes('"') ? `"${s}"` : `'${String(s).replace(/'/g, "\\'")}'`);

const list = (text) => text.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);

// {field: problem} for the form's values; empty when the config may be sent.
export function check(v, creating) {
  const problems = {};
  const fn = `function ${v.tenant}/${v.namespace}/${v.name}`;
  for (const part of ["tenant", "namespace", "name"])
    if (!NAME.test(v[part])) problems[part] = `${part} ${q(v[part])} is not a valid name (${NAME_RULE})`;
  const inputs = list(v.inputs);
  if (!inputs.length && !v.topicsPattern.trim())
    problems.inputs = `${fn}: a function needs inputs (or topics_pattern); got neither`;
  for (const input of inputs) {
    const p = topicProblem("inputs", input);
    if (p) problems.inputs = p;
  }
  const seen = new Set();
  for (const input of inputs) {
    if (seen.has(input)) problems.inputs = `${fn}: inputs lists a topic twice: ${input}`;
    seen.add(input);
  }
  if (v.topicsPattern.trim()) {
    try {
      new RegExp(v.topicsPattern);
    } catch (exc) {
      problems.topicsPattern = `${fn}: topics_pattern ${q(v.topicsPattern)} is not a valid regular expression: ${exc.message}`;
    }
  }
  for (const [key, label] of [["output", "output"], ["logTopic", "log_topic"], ["deadLetterTopic", "dead_letter_topic"]]) {
    if (!v[key].trim()) continue;
    const p = topicProblem(label, v[key].trim());
    if (p) problems[key] = p;
    else if (inputs.includes(v[key].trim()))
      problems[key] = `${fn}: topic ${v[key].trim()} is both an input and an output of the function; that would loop`;
  }
  if (creating && !v.file && !v.url.trim())
    problems.file = `${fn}: give the package (a .py, .zip or .whl file) or the path or digest of one uploaded before`;
  if (v.file && !KINDS.some((k) => v.file.name.endsWith(k)))
    problems.file = `${fn}: the package ${q(v.file.name)} is none of ${KINDS.join(", ")}`;
  if (v.file && v.file.name.endsWith(".zip") && !v.classname.trim())
    problems.classname = `${fn}: a .zip package needs classname (module.attr)`;
  if (v.classname.trim() && !/^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$/.test(v.classname.trim()))
    problems.classname = `${fn}: classname ${q(v.classname)} is not a module.attr name`;
  const par = Number(v.parallelism);
  if (!/^\d+$/.test(String(v.parallelism).trim()) || par < 1 || par > 256)
    problems.parallelism = `${fn}: parallelism must be a whole number from 1 to 256; got ${q(v.parallelism)}`;
  const retries = String(v.maxMessageRetries).trim();
  if (retries && (!/^\d+$/.test(retries) || Number(retries) > 100))
    problems.maxMessageRetries = `${fn}: max_message_retries must be a whole number from 0 to 100, or empty; got ${q(v.maxMessageRetries)}`;
  for (const [key, label] of [["userConfig", "user_config"], ["extra", "more config"]]) {
    if (!v[key].trim()) continue;
    try {
      const parsed = JSON.parse(v[key]);
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("not an object");
    } catch (exc) {
      problems[key] = `${fn}: ${label} must be a JSON object: ${exc.message}`;
    }
  }
  return problems;
}

function configOf(v) {
  const config = {
    inputs: list(v.inputs),
    processing_guarantees: v.guarantees,
    parallelism: Number(v.parallelism),
  };
  // Empty: unset, Pulsar's default (a failed message is delivered again without end).
  if (String(v.maxMessageRetries).trim()) config.max_message_retries = Number(v.maxMessageRetries);
  const optional = {
    classname: v.classname, topics_pattern: v.topicsPattern, output: v.output,
    log_topic: v.logTopic, dead_letter_topic: v.deadLetterTopic, subscription_name: v.subscriptionName,
  };
  for (const [key, value] of Object.entries(optional)) if (value.trim()) config[key] = value.trim();
  if (!config.inputs.length) delete config.inputs;
  if (v.userConfig.trim()) config.user_config = JSON.parse(v.userConfig);
  if (v.extra.trim()) Object.assign(config, JSON.parse(v.extra));
  return config;
}

const EMPTY = {
  tenant: "public", namespace: "default", name: "", file: null, url: "", classname: "", inputs: "",
  topicsPattern: "", output: "", guarantees: "at_least_once", parallelism: "1", maxMessageRetries: "",
  subscriptionName: "", logTopic: "", deadLetterTopic: "", userConfig: "", extra: "", mode: "drain",
};

function fromConfig(fqfn, c) {
  const [tenant, namespace, name] = fqfn.split("/");
  const text = (x) => (x === null || x === undefined ? "" : String(x));
  const userConfig = field(c, "user_config");
  return {
    ...EMPTY, tenant, namespace, name,
    classname: text(field(c, "classname") ?? field(c, "class_name")),
    inputs: (field(c, "inputs") || []).join(", "),
    topicsPattern: text(field(c, "topics_pattern")),
    output: text(field(c, "output")),
    guarantees: String(field(c, "processing_guarantees") || "at_least_once").toLowerCase().replace("atleast", "at_least").replace("atmost", "at_most"),
    parallelism: text(field(c, "parallelism") ?? 1),
    maxMessageRetries: text(field(c, "max_message_retries")),
    subscriptionName: text(field(c, "subscription_name")),
    logTopic: text(field(c, "log_topic")),
    deadLetterTopic: text(field(c, "dead_letter_topic")),
    userConfig: userConfig && Object.keys(userConfig).length ? JSON.stringify(userConfig) : "",
  };
}

function Field({ id, label, hint, problem, children }) {
  return html`<div class="field ${problem ? "invalid" : ""}">
    <label for=${id}>${label}</label>
    ${children}
    ${hint && !problem && html`<small id=${`${id}-hint`} class="muted">${hint}</small>`}
    ${problem && html`<small id=${`${id}-problem`} class="problem" role="alert">${problem}</small>`}
  </div>`;
}

export function SubmitPage({ fqfn }) {
  const creating = !fqfn;
  const [v, setV] = useState(EMPTY);
  const [problems, setProblems] = useState({});
  const [error, setError] = useState(null);
  const [warnings, setWarnings] = useState([]);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (!fqfn) return setV(EMPTY);
    get(fnPath(fqfn)).then((info) => setV(fromConfig(fqfn, info.config && typeof info.config === "object" ? info.config : info)), setError);
  }, [fqfn]);
  const set = (key) => (e) => setV({ ...v, [key]: e.target.type === "file" ? e.target.files[0] || null : e.target.value });
  const input = (id, key, props = {}) => html`<input id=${id} name=${key} value=${v[key]} onInput=${set(key)}
    aria-invalid=${problems[key] ? "true" : undefined}
    aria-describedby=${problems[key] ? `${id}-problem` : `${id}-hint`} ...${props} />`;
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    setWarnings([]);
    const found = check(v, creating);
    setProblems(found);
    if (Object.keys(found).length) {
      document.getElementById(`f-${Object.keys(found)[0]}`)?.focus();
      return;
    }
    const body = new FormData();
    body.set("functionConfig", JSON.stringify(configOf(v)));
    if (v.file) body.set("data", v.file, v.file.name);
    else if (v.url.trim()) body.set("url", v.url.trim());
    if (!creating) body.set("mode", v.mode);
    setBusy(true);
    try {
      const target = `${v.tenant}/${v.namespace}/${v.name}`;
      const info = await request(creating ? "POST" : "PUT", fnPath(target), body);
      if (info && info.warnings && info.warnings.length) setWarnings(info.warnings);
      else location.hash = `#/functions/${target}`;
    } catch (exc) {
      setError(exc);
    } finally {
      setBusy(false);
    }
  };
  return html`<section aria-labelledby="submit-title">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/functions">Functions</a>${fqfn && html` / <a href=${`#/functions/${fqfn}`}>${fqfn}</a>`}</nav>
    <h1 id="submit-title">${creating ? "New function" : `Update ${fqfn}`}</h1>
    <form class="card form" onSubmit=${submit} noValidate>
      <fieldset><legend>Name</legend><div class="row">
        <${Field} id="f-tenant" label="Tenant" problem=${problems.tenant}>${input("f-tenant", "tenant", { readOnly: !creating })}<//>
        <${Field} id="f-namespace" label="Namespace" problem=${problems.namespace}>${input("f-namespace", "namespace", { readOnly: !creating })}<//>
        <${Field} id="f-name" label="Name" problem=${problems.name}>${input("f-name", "name", { readOnly: !creating, required: true })}<//>
      </div></fieldset>
      <fieldset><legend>Code</legend><div class="row">
        <${Field} id="f-file" label="Package (.py, .zip, .whl)" problem=${problems.file}
          hint=${creating ? "uploaded with the request" : "none: keep the current version's code"}>
          <input id="f-file" type="file" accept=".py,.zip,.whl" onChange=${set("file")}
            aria-invalid=${problems.file ? "true" : undefined} aria-describedby=${problems.file ? "f-file-problem" : "f-file-hint"} /><//>
        <${Field} id="f-url" label="…or an uploaded package" hint="its upload path or sha256: digest">${input("f-url", "url")}<//>
        <${Field} id="f-classname" label="Class name" problem=${problems.classname} hint="module.attr; optional for a .py with one function">${input("f-classname", "classname")}<//>
      </div></fieldset>
      <fieldset><legend>Topics</legend><div class="row">
        <${Field} id="f-inputs" label="Inputs" problem=${problems.inputs} hint="comma separated">${input("f-inputs", "inputs")}<//>
        <${Field} id="f-topicsPattern" label="…or topics pattern" problem=${problems.topicsPattern} hint="a regex of tenant/namespace/topic">${input("f-topicsPattern", "topicsPattern")}<//>
        <${Field} id="f-output" label="Output" problem=${problems.output} hint="optional">${input("f-output", "output")}<//>
      </div></fieldset>
      <fieldset><legend>Running</legend><div class="row">
        <${Field} id="f-guarantees" label="Processing guarantees">
          <select id="f-guarantees" value=${v.guarantees} onChange=${set("guarantees")}>
            <option value="at_least_once">at least once</option>
            <option value="at_most_once">at most once</option>
            <option value="effectively_once">effectively once</option>
          </select><//>
        <${Field} id="f-parallelism" label="Parallelism" problem=${problems.parallelism} hint="instances, 1 to 256">${input("f-parallelism", "parallelism", { inputMode: "numeric" })}<//>
        <${Field} id="f-maxMessageRetries" label="Max message retries" problem=${problems.maxMessageRetries} hint="0 to 100; empty: delivered again without end, as in Pulsar">${input("f-maxMessageRetries", "maxMessageRetries", { inputMode: "numeric" })}<//>
      </div></fieldset>
      <details><summary>More</summary><div class="row">
        <${Field} id="f-subscriptionName" label="Subscription name" hint="default: the function's FQFN">${input("f-subscriptionName", "subscriptionName")}<//>
        <${Field} id="f-logTopic" label="Log topic" problem=${problems.logTopic}>${input("f-logTopic", "logTopic")}<//>
        <${Field} id="f-deadLetterTopic" label="Dead-letter topic" problem=${problems.deadLetterTopic}>${input("f-deadLetterTopic", "deadLetterTopic")}<//>
        <${Field} id="f-userConfig" label="User config (JSON)" problem=${problems.userConfig}>${input("f-userConfig", "userConfig")}<//>
        <${Field} id="f-extra" label="More config (JSON, Pulsar's or sparkfn's keys)" problem=${problems.extra}>${input("f-extra", "extra")}<//>
      </div></details>
      ${!creating && html`<${Field} id="f-mode" label="The running version ends by">
        <select id="f-mode" value=${v.mode} onChange=${set("mode")}><option value="drain">drain</option><option value="suspend">suspend</option></select><//>`}
      <${ErrorNote} error=${error} />
      ${warnings.length > 0 && html`<div class="warnings" role="status"><p>Saved, with warnings:</p>
        <ul>${warnings.map((w) => html`<li>${w}</li>`)}</ul>
        <a href=${`#/functions/${v.tenant}/${v.namespace}/${v.name}`}>Open the function</a></div>`}
      <div class="actions"><button type="submit" class="primary" disabled=${busy}>${busy ? "Submitting…" : creating ? "Create" : "Update"}</button>
        <a class="button ghost" href=${fqfn ? `#/functions/${fqfn}` : "#/functions"}>Cancel</a></div>
    </form>
  </section>`;
}
