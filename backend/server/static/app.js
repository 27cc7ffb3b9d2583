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
};

const state = { sessionId: "", fresh: true, agentTypes: [], knowledgeBases: [], running: null, nextKey: 0 };

// ---------------------------------------------------------------- HTTP

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
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
  return new ApiError(response.status, code, message);
}

async function api(path, { method = "GET", body, signal } = {}) {
  const response = await fetch(API + path, {
    method,
    headers: requestHeaders(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await apiError(response);
  return response.json();
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

function sourceEntry(source, testid) {
  const entry = element("li", testid);
  entry.dataset.testid = testid;
  const title = element("span", "citation-title", source.title || source.doc_id || "untitled");
  title.dataset.testid = `${testid}-title`;
  const snippet = element("p", "citation-snippet", source.snippet);
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
  if (route.method === "requested") {
    parts.push(`chosen by the request: ${route.reason}`);
  } else {
    const confidence = Number(route.confidence).toFixed(2);
    const routed = `${route.routed_kb_prefix || "no knowledge base"} (${route.method}, confidence ${confidence})`;
    parts.push(`router: ${routed}: ${route.reason}`);
  }
  if (generationMode) parts.push(`answer: ${generationMode}`);
  return `Route: ${parts.join(" · ")}`;
}

function showRoute(item, debug) {
  if (!debug || !debug.route) return;
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

// ---------------------------------------------------------------- wiring

async function reload() {
  showNotice("");
  setStatus("");
  try {
    await loadKnowledgeBases();
    await loadHistory();
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
});

ui.clear.addEventListener("click", async () => {
  if (!confirm("Delete every message of this conversation?")) return;
  try {
    const result = await api("/clear", { method: "POST", body: { session_id: state.sessionId } });
    ui.messages.replaceChildren();
    showNotice("");
    setStatus(`Cleared ${result.cleared_messages} messages.`);
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

const savedSession = localStorage.getItem(STORAGE.session);
useSession(savedSession || newSessionId(), !savedSession);
ui.apiKey.value = localStorage.getItem(STORAGE.apiKey) || "";
await reload();
document.body.dataset.ready = "true";
