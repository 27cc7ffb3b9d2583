// The built-in chat page (docs/web-page.md). Plain DOM, no framework, no build step.
// Text from the model or the user only ever reaches the page through textContent / text nodes.

const API = new URL("../api/v1", document.baseURI).pathname; // the page is served at <root>/ui/
const HISTORY_PAGE = 200; // the most the history endpoint returns at once
const STORAGE = {
  session: "graphrag.sessionId",
  apiKey: "graphrag.apiKey",
  kb: "graphrag.kb",
  agent: "graphrag.agent",
};
const STAGES = {
  routing: "Choosing a knowledge base…",
  retrieval: "Retrieving…",
  generation: "Writing the answer…",
};

const $ = (id) => document.getElementById(id);
const ui = {
  sessionId: $("session-id"),
  newConversation: $("new-conversation"),
  clear: $("clear"),
  kb: $("kb"),
  agent: $("agent"),
  keyForm: $("key-form"),
  apiKey: $("api-key"),
  notice: $("notice"),
  messages: $("messages"),
  composer: $("composer"),
  message: $("message"),
  send: $("send"),
  stop: $("stop"),
  status: $("status"),
  chatSettings: $("chat-settings"),
  chatView: $("chat-view"),
  tabChat: $("tab-chat"),
  tabDocuments: $("tab-documents"),
  emptyState: $("empty-state"),
  kbCards: $("kb-cards"),
  documentsView: $("documents-view"),
  docsKb: $("docs-kb"),
  uploadForm: $("upload-form"),
  uploadFiles: $("upload-files"),
  upload: $("upload"),
  docsNotice: $("docs-notice"),
  job: $("job"),
  jobProgress: $("job-progress"),
  jobStatus: $("job-status"),
  jobFailures: $("job-failures"),
  documentsCaption: $("documents-caption"),
  documentsList: $("documents-list"),
  reader: $("reader"),
  readerTitle: $("reader-title"),
  readerText: $("reader-text"),
};

const state = {
  sessionId: "",
  fresh: true,
  agentTypes: [],
  knowledgeBases: [],
  examples: new Map(), // kb_prefix -> example questions (GET /kbs/{kb}/examples)
  running: null,
  nextKey: 0,
};
const JOB_POLL_MS = 400; // the first wait before a job's status is read again
const JOB_POLL_MAX_MS = 3000; // the longest wait, so a long job stays well inside the default rate limit
const FINISHED_JOB = new Set(["done", "failed", "cancelled"]);

// ---------------------------------------------------------------- HTTP

class ApiError extends Error {
  constructor(status, code, message, retryAfterS = 0) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfterS = retryAfterS; // a 429's Retry-After
  }
}

function requestHeaders(json) {
  const headers = json ? { "Content-Type": "application/json" } : {};
  const key = localStorage.getItem(STORAGE.apiKey);
  if (key) headers.Authorization = `Bearer ${key}`;
  return headers;
}

/** The backend answers every failure with {"error": {"code", "message"}}. */
async function apiError(response) {
  let code = `http_${response.status}`;
  let message = response.statusText || "the request failed";
  try {
    const body = await response.json();
    if (body && body.error) ({ code, message } = body.error);
  } catch {
    // not JSON (a proxy's error page, say): keep the status line
  }
  return new ApiError(response.status, code, message, Number(response.headers.get("Retry-After")) || 0);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function api(path, { method = "GET", body, signal } = {}) {
  const form = body instanceof FormData; // multipart: the browser writes the Content-Type with its boundary
  const response = await fetch(API + path, {
    method,
    headers: requestHeaders(body !== undefined && !form),
    body: body === undefined || form ? body : JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await apiError(response);
  return response.status === 204 ? null : response.json();
}

/**
 * The events of an SSE body: LF-framed `data:` lines, one JSON event per blank-line-terminated frame.
 * Comment lines (the `: ping` heartbeat) and other fields are ignored.
 */
async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 1);
      if (line === "") {
        if (data.length) yield JSON.parse(data.join("\n"));
        data = [];
      } else if (line.startsWith("data:")) {
        data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
      }
    }
  }
}

// ---------------------------------------------------------------- rendering

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function addMessage(role, content = "") {
  const item = element("li", `message ${role}`);
  item.dataset.testid = "message";
  item.dataset.role = role;
  item.dataset.key = String(state.nextKey++);
  item.append(element("span", "who", role === "user" ? "You" : "Assistant"));
  const text = element("div", "text");
  text.dataset.testid = "message-text";
  text.append(document.createTextNode(content)); // one text node, grown with appendData while streaming
  item.append(text);
  ui.messages.append(item);
  ui.composer.scrollIntoView({ block: "end" }); // the newest message and the input stay in view
  return item;
}

const part = (item, testid) => item.querySelector(`[data-testid="${testid}"]`);

function appendText(item, token) {
  part(item, "message-text").firstChild.appendData(token);
}

function showReasoning(item, text) {
  let box = part(item, "reasoning");
  if (!box) {
    box = element("details", "reasoning");
    box.dataset.testid = "reasoning";
    box.append(element("summary", "", "Reasoning"), element("p"));
    part(item, "message-text").before(box);
  }
  box.querySelector("p").append(text);
}

/**
 * Markdown in a document's text shown as what it means, never parsed as HTML: heading and list markers go,
 * **strong**, *emphasis* and `code` become elements whose text is set with textContent, [text](url) its text.
 */
function renderMarkdownText(text) {
  const plain = text
    .replace(/(^|\s)#{1,6}\s+/g, "$1") // heading markers, also inside a snippet whose lines were joined
    .replace(/(^|\s)[-*+]\s+(?=\S)/g, "$1• "); // list items
  return renderInline(plain);
}

/** The inline part of markdown: emphasis and code as elements (text set with textContent), links as their text. */
function renderInline(text) {
  const plain = text.replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1"); // links and images: their text
  const fragment = document.createDocumentFragment();
  let last = 0;
  for (const match of plain.matchAll(/\*\*(.+?)\*\*|__(.+?)__|`([^`]+)`|\*(\S(?:.*?\S)?)\*/g)) {
    fragment.append(plain.slice(last, match.index));
    const [tag, inner] = match[1] ?? match[2] ? ["strong", match[1] ?? match[2]] : match[3] ? ["code", match[3]] : ["em", match[4]];
    fragment.append(element(tag, "", inner));
    last = match.index + match[0].length;
  }
  fragment.append(plain.slice(last));
  return fragment;
}

const BLOCKS = [
  ["fence", /^\s*(```|~~~)/],
  ["heading", /^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$/],
  ["rule", /^\s{0,3}([-*_])(\s*\1){2,}\s*$/],
  ["ul", /^\s*[-*+]\s+(.*)$/],
  ["ol", /^\s*\d+[.)]\s+(.*)$/],
  ["quote", /^\s*>\s?(.*)$/],
  ["blank", /^\s*$/],
];

function blockOf(line) {
  for (const [kind, pattern] of BLOCKS) {
    const match = line.match(pattern);
    if (match) return { kind, match };
  }
  return { kind: "text", match: [line, line] };
}

/** Where a text or quote line goes on: the open paragraph or quote, or the last item of the open list. */
function continuation(open, kind) {
  if (!open) return null;
  if (open.tagName === "UL" || open.tagName === "OL") return kind === "text" ? open.lastChild : null;
  return kind === "text" || open.tagName === "BLOCKQUOTE" ? open : null;
}

// Each block kind appends itself to `doc.fragment`; `doc.open` is the block the next line may continue.
const RENDER_BLOCK = {
  fence(doc, match) {
    const code = [];
    while (++doc.at < doc.lines.length && !doc.lines[doc.at].trim().startsWith(match[1])) code.push(doc.lines[doc.at]);
    doc.fragment.append(element("pre", "", code.join("\n")));
    doc.open = null;
  },
  heading(doc, match) {
    const heading = element(`h${Math.min(match[1].length + 2, 6)}`); // the page's own title is an h2
    heading.append(renderInline(match[2]));
    doc.fragment.append(heading);
    doc.open = null;
  },
  rule(doc) {
    doc.fragment.append(element("hr"));
    doc.open = null;
  },
  blank(doc) {
    doc.open = null;
  },
  ul: (doc, match, kind) => RENDER_BLOCK.ol(doc, match, kind),
  ol(doc, match, kind) {
    if (doc.open?.tagName !== kind.toUpperCase()) doc.fragment.append((doc.open = element(kind)));
    const item = element("li");
    item.append(renderInline(match[1]));
    doc.open.append(item);
  },
  quote: (doc, match, kind) => RENDER_BLOCK.text(doc, match, kind),
  text(doc, match, kind) {
    const content = renderInline(match[1].trim());
    const target = continuation(doc.open, kind);
    if (target) return target.append(" ", content);
    doc.open = element(kind === "quote" ? "blockquote" : "p");
    doc.open.append(content);
    doc.fragment.append(doc.open);
  },
};

/**
 * A whole markdown document as headings, paragraphs, lists, quotes and code blocks made with createElement,
 * all text through renderInline (textContent): nothing is parsed as HTML.
 */
function renderMarkdownDocument(text) {
  const doc = { fragment: document.createDocumentFragment(), open: null, lines: text.replace(/\r\n?/g, "\n").split("\n"), at: 0 };
  for (; doc.at < doc.lines.length; doc.at++) {
    const { kind, match } = blockOf(doc.lines[doc.at]);
    RENDER_BLOCK[kind](doc, match, kind);
  }
  return doc.fragment;
}

function sourceEntry(source, testid) {
  const entry = element("li", testid);
  entry.dataset.testid = testid;
  entry.dataset.sourceId = source.id || "";
  const title = element("span", "citation-title", source.title || source.doc_id || "untitled");
  title.dataset.testid = `${testid}-title`;
  const snippet = element("p", "citation-snippet");
  snippet.append(renderMarkdownText(source.snippet || ""));
  snippet.dataset.testid = `${testid}-snippet`;
  entry.append(title, snippet);
  return entry;
}

/** The sources the answer cites, numbered as its [n] markers, then the ones it was given and did not cite. */
function showCitations(item, citations, consulted = []) {
  part(item, "citations")?.remove();
  part(item, "consulted")?.remove();
  let after = part(item, "message-text");
  if (citations.length) {
    const list = element("ol", "citations");
    list.dataset.testid = "citations";
    list.setAttribute("aria-label", "Sources cited");
    citations.forEach((citation, index) => {
      const entry = sourceEntry(citation, "citation");
      entry.id = `cite-${item.dataset.key}-${index + 1}`;
      list.append(entry);
    });
    after.after(list);
    after = list;
  }
  if (consulted.length) {
    const box = element("details", "consulted");
    box.dataset.testid = "consulted";
    const list = element("ul", "consulted-list");
    consulted.forEach((source) => list.append(sourceEntry(source, "consulted-source")));
    box.append(element("summary", "", `Also consulted, not cited (${consulted.length})`), list);
    after.after(box);
  }
  item.dataset.citations = String(citations.length);
  item.evidence = { cited: citations.map((c) => c.id), consulted: consulted.map((c) => c.id) };
  if (citations.length || consulted.length) addEvidenceButton(item);
}

/** Once the answer is complete, turn its [n] markers into links to the n-th citation. */
function linkMarkers(item) {
  const count = Number(item.dataset.citations || 0);
  const text = part(item, "message-text");
  if (!count) return;
  const pieces = [];
  let last = 0;
  for (const match of text.textContent.matchAll(/\[(\d+)\]/g)) {
    const n = Number(match[1]);
    if (n < 1 || n > count) continue;
    pieces.push(document.createTextNode(text.textContent.slice(last, match.index)));
    const link = element("a", "marker", match[0]);
    link.href = `#cite-${item.dataset.key}-${n}`;
    pieces.push(link);
    last = match.index + match[0].length;
  }
  if (!pieces.length) return;
  pieces.push(document.createTextNode(text.textContent.slice(last)));
  text.replaceChildren(...pieces);
}

function describeRoute(route, generationMode) {
  const parts = [];
  if (!route.worker_name) {
    parts.push("general chat (no retrieval)");
  } else {
    const agent = route.worker_name.split(":")[1] || "";
    const why = route.agent_reason ? ` (${route.agent_reason})` : "";
    parts.push(`knowledge base ${route.kb_prefix}`, `agent ${agent}${why}`, `worker ${route.worker_name}`);
  }
  parts.push(whyThisKb(route));
  if (generationMode) parts.push(`answer: ${generationMode}`);
  return `Route: ${parts.join(" · ")}`;
}

/**
 * Why the turn went where it went, true to the decision: a KB asked for and kept is not "no knowledge base", and
 * a guess the router was not sure enough of (`routed_kb_prefix` is the guess, taken or not) is not its choice.
 */
function whyThisKb(route) {
  if (route.method === "requested") return `chosen by the request: ${route.reason}`;
  const how = `${route.method}, confidence ${Number(route.confidence).toFixed(2)}`;
  if (route.routed_kb_prefix && route.routed_kb_prefix === route.kb_prefix && route.worker_name) {
    return `router: ${route.kb_prefix} (${how}): ${route.reason}`;
  }
  const guess = route.routed_kb_prefix ? `best guess ${route.routed_kb_prefix}, ${how}` : how;
  if (route.requested_kb_prefix && route.kb_prefix === route.requested_kb_prefix) {
    return `asked for ${route.kb_prefix}; the router found no better match (${guess}): ${route.reason}`;
  }
  const fits = route.routed_kb_prefix ? "no knowledge base fits the message well enough" : "no knowledge base fits the message";
  return `router: ${fits} (${guess}): ${route.reason}`;
}

function showRoute(item, debug) {
  if (!debug || !debug.route) return;
  if (debug.route.kb_prefix && debug.route.worker_name) item.dataset.kb = debug.route.kb_prefix;
  const line = element("p", "route", describeRoute(debug.route, debug.generation_mode));
  line.dataset.testid = "route";
  if (debug.route.reason) line.title = debug.route.reason;
  part(item, "message-text").after(line);
}

function showError(item, message) {
  const line = element("p", "error", message);
  line.dataset.testid = "message-error";
  item.append(line);
}

function showNote(item, message) {
  item.append(element("p", "note", message));
}

function showNotice(message) {
  ui.notice.textContent = message;
  ui.notice.hidden = !message;
}

function describeError(error) {
  if (error instanceof ApiError) {
    const hint = error.status === 401 ? " — enter an API key under “API key”." : "";
    return `${error.message} (${error.code}, HTTP ${error.status})${hint}`;
  }
  return `Could not reach the server: ${error.message}`;
}

function setStatus(text) {
  ui.status.textContent = text;
}

// ---------------------------------------------------------------- sessions and knowledge bases

function newSessionId() {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function useSession(sessionId, fresh) {
  state.sessionId = sessionId;
  state.fresh = fresh; // a new id has no history on the server yet
  localStorage.setItem(STORAGE.session, sessionId);
  ui.sessionId.textContent = sessionId;
}

function fillAgents() {
  const kb = state.knowledgeBases.find((entry) => entry.kb_prefix === ui.kb.value);
  const wanted = ui.agent.value || localStorage.getItem(STORAGE.agent) || "";
  const auto = kb ? `auto (default: ${kb.default_agent})` : "auto";
  const options = [new Option(auto, "")];
  if (ui.kb.value !== "general") options.push(...state.agentTypes.map((type) => new Option(type, type)));
  ui.agent.replaceChildren(...options);
  ui.agent.value = options.some((option) => option.value === wanted) ? wanted : "";
  ui.agent.disabled = ui.kb.value === "general";
}

async function loadKnowledgeBases() {
  const listing = await api("/kbs");
  state.knowledgeBases = listing.knowledge_bases;
  state.agentTypes = listing.agent_types;
  const fixed = [new Option("auto — let the router decide", ""), new Option("general chat", "general")];
  const kbs = listing.knowledge_bases.map((kb) => {
    const option = new Option(kb.kb_prefix, kb.kb_prefix);
    option.title = kb.description;
    return option;
  });
  ui.kb.replaceChildren(...fixed, ...kbs);
  const saved = localStorage.getItem(STORAGE.kb) || "";
  ui.kb.value = [...ui.kb.options].some((option) => option.value === saved) ? saved : "";
  fillAgents();
}

async function loadHistory() {
  ui.messages.replaceChildren();
  if (state.fresh) return;
  let listing;
  try {
    listing = await api(`/conversations/${encodeURIComponent(state.sessionId)}/messages?limit=${HISTORY_PAGE}`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return; // nothing said in this session yet
    throw error;
  }
  if (listing.messages.length === HISTORY_PAGE) setStatus(`Showing the last ${HISTORY_PAGE} messages.`);
  for (const message of listing.messages) {
    const item = addMessage(message.role, message.content);
    if (message.role !== "assistant") continue;
    showCitations(item, message.citations, message.consulted);
    linkMarkers(item);
    showRoute(item, message.debug);
    if (message.debug && message.debug.error) showError(item, message.debug.error);
    if (!message.completed) showNote(item, "Partial answer (stopped or failed before the end).");
  }
}

// ---------------------------------------------------------------- chatting

function setRunning(controller) {
  state.running = controller;
  ui.send.disabled = controller !== null;
  ui.stop.disabled = controller === null;
  ui.clear.disabled = controller !== null;
  ui.newConversation.disabled = controller !== null;
}

function chatBody(message) {
  const body = { session_id: state.sessionId, message };
  if (ui.kb.value) body.kb_prefix = ui.kb.value;
  if (ui.agent.value && !ui.agent.disabled) body.agent_type = ui.agent.value;
  return body;
}

function onProgress(progress) {
  if (progress.stage === "retrieval" && progress.agent_type) {
    const found = progress.error ? `failed: ${progress.error}` : `${progress.retrieval_count ?? 0} results`;
    setStatus(`Retrieval with ${progress.agent_type}: ${found}`);
  } else if (progress.completed < progress.total) {
    setStatus(STAGES[progress.stage] || "");
  }
}

/** The route decision is stored with the answer (`debug.route`); the stream itself does not carry it. */
async function showStoredRoute(item, messageId) {
  try {
    const path = `/conversations/${encodeURIComponent(state.sessionId)}/messages?limit=2`;
    const listing = await api(path);
    const stored = listing.messages.find((message) => message.id === messageId);
    if (stored) showRoute(item, stored.debug);
  } catch (error) {
    showNote(item, `The route decision could not be loaded: ${describeError(error)}`);
  }
}

async function send(message) {
  showNotice("");
  state.fresh = false;
  ui.emptyState.hidden = true;
  const question = addMessage("user", message);
  const answer = addMessage("assistant");
  answer.dataset.state = "streaming";
  answer.setAttribute("aria-busy", "true");
  const controller = new AbortController();
  setRunning(controller);
  setStatus("Sending…");
  let messageId;
  let failed = false;
  try {
    const response = await fetch(`${API}/chat/stream`, {
      method: "POST",
      headers: requestHeaders(true),
      body: JSON.stringify(chatBody(message)),
      signal: controller.signal,
    });
    if (!response.ok) throw await apiError(response);
    for await (const event of readEvents(response.body)) {
      switch (event.status) {
        case "progress":
          onProgress(event.content);
          break;
        case "citations": // after the last token: the sources the answer cites, and the others it was given
          showCitations(answer, event.content, event.consulted);
          break;
        case "token":
          appendText(answer, event.content);
          break;
        case "reasoning":
          showReasoning(answer, event.content);
          break;
        case "error":
          failed = true;
          showError(answer, event.message);
          break;
        case "done":
          messageId = event.message_id;
          break;
      }
    }
    if (messageId === undefined) {
      failed = true;
      showError(answer, "The connection closed before the answer was complete.");
    } else if (messageId) {
      await showStoredRoute(answer, messageId);
    }
    linkMarkers(answer);
    answer.dataset.state = failed ? "error" : "done";
    setStatus(failed ? "The answer did not complete." : "");
  } catch (error) {
    if (error.name === "AbortError") {
      answer.dataset.state = "stopped";
      showNote(answer, "Stopped. The partial answer is kept in the history.");
      setStatus("Stopped.");
    } else if (error instanceof ApiError) {
      // Rejected before the stream opened: nothing was stored, so give the message back for editing.
      question.remove();
      answer.remove();
      showEmptyState();
      ui.message.value = message;
      showNotice(describeError(error));
      setStatus("");
    } else {
      answer.dataset.state = "error";
      showError(answer, describeError(error));
      setStatus("");
    }
  } finally {
    answer.removeAttribute("aria-busy");
    setRunning(null);
  }
}


// ---------------------------------------------------------------- the evidence graph

let graphLibrary = null;

/** vis-network (served from the pyvis wheel under /ui/), loaded the first time a graph is opened. */
function loadGraphLibrary() {
  graphLibrary ??= new Promise((resolve, reject) => {
    const css = document.createElement("link");
    css.rel = "stylesheet";
    css.href = "vis-network.css";
    const script = document.createElement("script");
    script.src = "vis-network.min.js";
    script.onload = () => resolve(window.vis);
    script.onerror = () => {
      graphLibrary = null;
      reject(new Error("the graph library (vis-network) could not be loaded"));
    };
    document.head.append(css, script);
  });
  return graphLibrary;
}

function addEvidenceButton(item) {
  if (part(item, "evidence-toggle")) return;
  const button = element("button", "evidence-toggle", "Evidence graph");
  button.type = "button";
  button.dataset.testid = "evidence-toggle";
  button.setAttribute("aria-expanded", "false");
  button.addEventListener("click", () => toggleEvidence(item, button));
  const anchor = part(item, "consulted") || part(item, "citations") || part(item, "message-text");
  anchor.after(button);
}

async function toggleEvidence(item, button) {
  const open = part(item, "evidence");
  if (open) {
    open.remove();
    button.setAttribute("aria-expanded", "false");
    return;
  }
  const panel = element("section", "evidence");
  panel.dataset.testid = "evidence";
  panel.setAttribute("aria-label", "Evidence graph");
  const canvas = element("div", "evidence-canvas");
  canvas.dataset.testid = "evidence-canvas";
  const detail = element("div", "evidence-detail", "Select a node or an edge to read it.");
  detail.dataset.testid = "evidence-detail";
  const legend = element("p", "evidence-legend",
    "Boxes: passages · dots: entities · diamonds: communities · dark: cited by the answer · light: consulted, not cited · grey: mentioned by a passage or a community · dashed: a passage mentions an entity · dotted: a community contains an entity");
  panel.append(legend, canvas, detail);
  button.after(panel);
  button.setAttribute("aria-expanded", "true");
  try {
    const kb = item.dataset.kb || (ui.kb.value !== "general" ? ui.kb.value : "");
    if (!kb) throw new Error("the knowledge base of this answer is not known");
    const ids = [...item.evidence.cited, ...item.evidence.consulted];
    const query = ids.map((id) => `id=${encodeURIComponent(id)}`).join("&");
    const [vis, graph] = await Promise.all([loadGraphLibrary(), api(`/kbs/${encodeURIComponent(kb)}/evidence?${query}`)]);
    drawEvidence(vis, canvas, detail, graph, new Set(item.evidence.cited));
  } catch (error) {
    detail.textContent = `The evidence graph could not be drawn: ${error instanceof ApiError ? describeError(error) : error.message}`;
    detail.classList.add("error");
  }
}

const COLORS = { cited: "#2357b5", consulted: "#8fb0e6", mentioned: "#c9ced6" };
const SHAPES = { chunk: "box", entity: "dot", community: "diamond" };
const KINDS = { chunk: "passage", entity: "entity", community: "community" };
const DASHES = { mentions: true, contains: [2, 4] }; // a relation is drawn solid

function drawEvidence(vis, canvas, detail, graph, cited) {
  const role = (node) => (cited.has(node.id) ? "cited" : node.source ? "consulted" : "mentioned");
  const nodes = graph.nodes.map((node) => ({
    id: node.id,
    label: node.label.length > 40 ? node.label.slice(0, 39) + "…" : node.label,
    shape: SHAPES[node.kind] || "dot",
    size: 12,
    color: COLORS[role(node)],
    font: { color: role(node) === "cited" && node.kind === "chunk" ? "#ffffff" : "#1d232b", size: 13 },
  }));
  const edges = graph.edges.map((edge, index) => ({
    id: index,
    from: edge.source,
    to: edge.target,
    dashes: DASHES[edge.kind] || false,
    width: edge.is_source ? 3 : 1,
    color: { color: edge.is_source ? COLORS.cited : "#9aa3ad" },
  }));
  canvas.dataset.nodes = String(nodes.length);
  canvas.dataset.edges = String(edges.length);
  if (!nodes.length) {
    detail.textContent = "The knowledge base no longer holds these sources.";
    canvas.dataset.drawn = "true";
    return;
  }
  const network = new vis.Network(
    canvas,
    { nodes: new vis.DataSet(nodes), edges: new vis.DataSet(edges) },
    { physics: { stabilization: { iterations: 150 } }, interaction: { hover: true }, edges: { smooth: false } },
  );
  // Once laid out, the graph holds still (nodes can still be dragged): a click lands where the node is drawn.
  network.once("stabilizationIterationsDone", () => {
    network.setOptions({ physics: false });
    network.once("afterDrawing", () => (canvas.dataset.drawn = "true"));
    network.redraw();
  });
  const byId = new Map(graph.nodes.map((node) => [node.id, node]));
  network.on("click", (event) => {
    if (event.nodes.length) showNode(detail, byId.get(event.nodes[0]), role(byId.get(event.nodes[0])));
    else if (event.edges.length) showEdge(detail, graph.edges[event.edges[0]], byId);
  });
  canvas.graph = network; // for the browser test
}

function showNode(detail, node, role) {
  const heading = element("strong", "", node.label);
  const kind = element("span", "evidence-kind", ` ${KINDS[node.kind] || node.kind}, ${role}`);
  const text = element("p", "evidence-text");
  text.append(renderMarkdownText(node.detail || ""));
  detail.replaceChildren(heading, kind, text);
  detail.classList.remove("error");
}

const EDGE_TEXT = { mentions: "The passage mentions the entity.", contains: "The community contains the entity." };

function showEdge(detail, edge, byId) {
  const name = (id) => byId.get(id)?.label ?? id;
  const heading = element("strong", "", `${name(edge.source)} — ${name(edge.target)}`);
  const text = element("p", "evidence-text", EDGE_TEXT[edge.kind] || edge.label);
  detail.replaceChildren(heading, text);
}

// ---------------------------------------------------------------- the start screen

/** Before the first message: each KB with its description and a few questions it can answer. */
async function showEmptyState() {
  const empty = ui.messages.children.length === 0;
  ui.emptyState.hidden = !empty || !state.knowledgeBases.length;
  if (ui.emptyState.hidden) return;
  await Promise.all(state.knowledgeBases.filter((kb) => !state.examples.has(kb.kb_prefix)).map(loadExamples));
  ui.kbCards.replaceChildren(...state.knowledgeBases.map(kbCard));
}

async function loadExamples(kb) {
  try {
    state.examples.set(kb.kb_prefix, (await api(`/kbs/${encodeURIComponent(kb.kb_prefix)}/examples`)).examples);
  } catch {
    state.examples.set(kb.kb_prefix, []); // the card still shows the KB and its description
  }
}

function kbCard(kb) {
  const card = element("li", "kb-card");
  card.dataset.testid = "kb-card";
  card.append(element("h3", "", kb.kb_prefix), element("p", "kb-description", kb.description));
  const examples = element("ul", "examples");
  for (const question of state.examples.get(kb.kb_prefix) || []) {
    const button = element("button", "example", question);
    button.type = "button";
    button.dataset.testid = "example";
    button.addEventListener("click", () => {
      if (state.running) return;
      ui.kb.value = kb.kb_prefix;
      localStorage.setItem(STORAGE.kb, kb.kb_prefix);
      fillAgents();
      send(question);
    });
    const entry = element("li");
    entry.append(button);
    examples.append(entry);
  }
  card.append(examples);
  return card;
}

// ---------------------------------------------------------------- documents

function showDocsNotice(message) {
  ui.docsNotice.textContent = message;
  ui.docsNotice.hidden = !message;
}

function describeAdminError(error, what) {
  if (error instanceof ApiError && error.status === 403) {
    return `Only an administrator may ${what}: ${error.message} (${error.code}, HTTP 403). Nothing was changed.`;
  }
  return error instanceof ApiError ? describeError(error) : `Could not reach the server: ${error.message}`;
}

function fillDocsKbs() {
  const wanted = ui.docsKb.value || (ui.kb.value && ui.kb.value !== "general" ? ui.kb.value : "");
  ui.docsKb.replaceChildren(...state.knowledgeBases.map((kb) => new Option(kb.kb_prefix, kb.kb_prefix)));
  if (state.knowledgeBases.some((kb) => kb.kb_prefix === wanted)) ui.docsKb.value = wanted;
}

const docsPath = (suffix = "") => `/kbs/${encodeURIComponent(ui.docsKb.value)}/documents${suffix}`;

async function loadDocuments() {
  if (!ui.docsKb.value) return;
  try {
    const listing = await api(docsPath());
    ui.documentsCaption.textContent = `${listing.documents.length} documents in ${listing.kb_prefix}`;
    ui.documentsList.replaceChildren(...listing.documents.map(documentRow));
  } catch (error) {
    showDocsNotice(describeError(error));
  }
}

function documentRow(document_) {
  const row = element("tr");
  row.dataset.testid = "document";
  row.dataset.docId = document_.doc_id;
  const title = element("td", "", document_.title || document_.source || document_.doc_id);
  title.dataset.testid = "document-title";
  const added = document_.created_at ? new Date(document_.created_at).toLocaleString() : "";
  const actions = element("td", "document-actions");
  const read = element("button", "", "Read");
  read.type = "button";
  read.dataset.testid = "document-read";
  read.addEventListener("click", () => readDocument(document_));
  const remove = element("button", "danger", "Delete");
  remove.type = "button";
  remove.dataset.testid = "document-delete";
  remove.addEventListener("click", () => deleteDocument(document_, row));
  actions.append(read, remove);
  row.append(title, element("td", "", String(document_.chunk_count)), element("td", "", added), actions);
  return row;
}

async function readDocument(document_) {
  try {
    const stored = await api(docsPath(`/${encodeURIComponent(document_.doc_id)}`));
    ui.readerTitle.textContent = stored.title || stored.doc_id;
    ui.readerText.replaceChildren(renderMarkdownDocument(stored.text));
    const first = ui.readerText.firstElementChild;
    if (/^H\d$/.test(first?.tagName ?? "") && first.textContent === ui.readerTitle.textContent) first.remove();
    ui.reader.hidden = false;
    ui.reader.scrollIntoView({ block: "start" });
  } catch (error) {
    showDocsNotice(describeError(error));
  }
}

async function deleteDocument(document_, row) {
  if (!confirm(`Delete “${document_.title || document_.doc_id}” and everything only it supports?`)) return;
  showDocsNotice("");
  try {
    await api(docsPath(`/${encodeURIComponent(document_.doc_id)}`), { method: "DELETE" });
    row.remove();
    ui.reader.hidden = true;
    await loadDocuments();
  } catch (error) {
    showDocsNotice(describeAdminError(error, "delete documents"));
  }
}

function describeJob(job) {
  const c = job.counts;
  const counts = `${c.documents_added} added, ${c.documents_replaced} replaced, ${c.documents_unchanged} unchanged, ${c.documents_failed} failed · ${c.chunks_written} chunks, ${c.entity_mentions} entity and ${c.relation_mentions} relation mentions`;
  const error = job.error ? ` — ${job.error}` : "";
  return `Job ${job.status}: ${job.processed} of ${job.total} documents · ${counts}${error}`;
}

function showJob(job) {
  ui.job.hidden = false;
  ui.job.dataset.status = job.status;
  ui.jobProgress.max = Math.max(job.total, 1);
  ui.jobProgress.value = job.processed;
  ui.jobStatus.textContent = describeJob(job);
  ui.jobFailures.replaceChildren(
    ...job.failures.map((failure) => element("li", "error", `${failure.title || failure.source}: ${failure.error}`)),
  );
}

async function upload() {
  const files = [...ui.uploadFiles.files];
  if (!files.length || !ui.docsKb.value) return;
  showDocsNotice("");
  const form = new FormData();
  for (const file of files) form.append("files", file, file.name);
  ui.upload.disabled = true;
  try {
    let job = await api(docsPath(), { method: "POST", body: form });
    showJob(job);
    // Polls count against the caller's rate limit: they slow down as a job goes on, and a 429 is waited out.
    let pollMs = JOB_POLL_MS;
    while (!FINISHED_JOB.has(job.status)) {
      await sleep(pollMs);
      pollMs = Math.min(pollMs * 1.5, JOB_POLL_MAX_MS);
      try {
        job = await api(`/jobs/${encodeURIComponent(job.job_id)}`);
      } catch (error) {
        if (!(error instanceof ApiError && error.status === 429)) throw error;
        await sleep(Math.max(error.retryAfterS * 1000, pollMs));
        continue;
      }
      showJob(job);
    }
    ui.uploadFiles.value = "";
    await loadDocuments();
  } catch (error) {
    showDocsNotice(describeAdminError(error, "upload documents"));
  } finally {
    ui.upload.disabled = false;
  }
}

// ---------------------------------------------------------------- views

function showView() {
  const documents = location.hash === "#documents";
  ui.documentsView.hidden = !documents;
  ui.chatSettings.hidden = documents;
  ui.chatView.hidden = documents;
  ui.composer.hidden = documents;
  ui.tabDocuments.setAttribute("aria-current", documents ? "page" : "false");
  ui.tabChat.setAttribute("aria-current", documents ? "false" : "page");
  if (documents) {
    fillDocsKbs();
    loadDocuments();
  }
}

// ---------------------------------------------------------------- wiring

async function reload() {
  showNotice("");
  setStatus("");
  try {
    await loadKnowledgeBases();
    await loadHistory();
    await showEmptyState();
    showView();
  } catch (error) {
    showNotice(describeError(error));
  }
}

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const message = ui.message.value.trim();
  if (!message || state.running) return;
  ui.message.value = "";
  send(message);
});

ui.message.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    ui.composer.requestSubmit();
  }
});

ui.stop.addEventListener("click", () => state.running?.abort());

ui.kb.addEventListener("change", () => {
  localStorage.setItem(STORAGE.kb, ui.kb.value);
  fillAgents();
});

ui.agent.addEventListener("change", () => localStorage.setItem(STORAGE.agent, ui.agent.value));

ui.newConversation.addEventListener("click", () => {
  useSession(newSessionId(), true);
  ui.messages.replaceChildren();
  showNotice("");
  setStatus("New conversation.");
  showEmptyState();
});

ui.clear.addEventListener("click", async () => {
  if (!confirm("Delete every message of this conversation?")) return;
  try {
    const result = await api("/clear", { method: "POST", body: { session_id: state.sessionId } });
    ui.messages.replaceChildren();
    showNotice("");
    setStatus(`Cleared ${result.cleared_messages} messages.`);
    showEmptyState();
  } catch (error) {
    showNotice(describeError(error));
  }
});

ui.keyForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const key = ui.apiKey.value.trim();
  if (key) localStorage.setItem(STORAGE.apiKey, key);
  else localStorage.removeItem(STORAGE.apiKey);
  await reload();
  if (!ui.notice.textContent) setStatus(key ? "API key saved." : "API key removed.");
});

window.addEventListener("hashchange", showView);
ui.docsKb.addEventListener("change", () => {
  ui.reader.hidden = true;
  ui.job.hidden = true;
  showDocsNotice("");
  loadDocuments();
});
ui.uploadForm.addEventListener("submit", (event) => {
  event.preventDefault();
  upload();
});

const savedSession = localStorage.getItem(STORAGE.session);
useSession(savedSession || newSessionId(), !savedSession);
ui.apiKey.value = localStorage.getItem(STORAGE.apiKey) || "";
await reload();
document.body.dataset.ready = "true";
