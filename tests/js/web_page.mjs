// Drives the built-in web chat page (/ui/) in headless Chromium with playwright-core, as a user would.
// Run by tests/e2e/test_web_page.py: argv[2] is JSON
//   {baseUrl, chromiumPath, screenshot, scenario: "chat" | "auth" | "docs" | "evidence", question, kb, agent,
//    stopQuestion, errorQuestion, tooLong, apiKey, readerKey, uploadPath, offTopicQuestion, unsureQuestion,
//    communityAgent, communityQuestion, screenshots: {empty, documents, evidence}}
// and the last stdout line is one JSON object with what the page showed.
import { chromium } from "playwright-core";

const args = JSON.parse(process.argv[2]);
const TIMEOUT = 30_000;

const browser = await chromium.launch({
  executablePath: args.chromiumPath,
  headless: true,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});

const consoleErrors = []; // CSP violations and failed requests show here
const pageErrors = []; // uncaught exceptions in the page
const page = await (await browser.newContext({ viewport: { width: 1100, height: 900 } })).newPage();
page.setDefaultTimeout(TIMEOUT);
page.on("console", (message) => {
  if (message.type() === "error") consoleErrors.push(message.text());
});
page.on("pageerror", (error) => pageErrors.push(String(error)));
page.on("dialog", (dialog) => dialog.accept()); // the "clear" confirmation

const ready = () => page.waitForSelector("body[data-ready=true]");

async function open() {
  await page.goto(args.baseUrl + "/");
  await ready();
}

async function reload() {
  await page.reload();
  await ready();
}

/** Every message in the view, as the user sees it. */
function messages() {
  return page.$$eval("[data-testid=message]", (items) =>
    items.map((item) => {
      const all = (testid) => [...item.querySelectorAll(`[data-testid=${testid}]`)];
      const text = (testid) => all(testid)[0]?.textContent ?? null;
      return {
        role: item.dataset.role,
        state: item.dataset.state ?? null,
        text: text("message-text"),
        htmlElementsInText: item.querySelectorAll("[data-testid=message-text] *:not(a.marker)").length,
        markerLinks: item.querySelectorAll("[data-testid=message-text] a.marker").length,
        citations: all("citation").map((citation) => ({
          title: citation.querySelector("[data-testid=citation-title]").textContent,
          snippet: citation.querySelector("[data-testid=citation-snippet]").textContent,
        })),
        consulted: all("consulted-source").map((source) => ({
          title: source.querySelector("[data-testid=consulted-source-title]").textContent,
          snippet: source.querySelector("[data-testid=consulted-source-snippet]").textContent,
        })),
        route: text("route"),
        citationSnippetElements: [...item.querySelectorAll("[data-testid=citation-snippet] *")].map((e) => e.tagName),
        evidenceButton: all("evidence-toggle").length === 1,
        error: text("message-error"),
        note: item.querySelector(".note")?.textContent ?? null,
      };
    }),
  );
}

/** Send a message with the form; resolves once the last answer left the "streaming" state. */
async function ask(question) {
  await page.fill("[data-testid=message-input]", question);
  await page.click("[data-testid=send]");
  await page.waitForFunction(() => {
    const answers = document.querySelectorAll("[data-testid=message][data-role=assistant]");
    const last = answers[answers.length - 1];
    return last && last.dataset.state && last.dataset.state !== "streaming";
  });
  return (await messages()).at(-1);
}

/** Records the length of the newest answer's text at every DOM change, from inside the page. */
async function watchStreaming() {
  await page.evaluate(() => {
    window.__lengths = [];
    const log = document.querySelector("[data-testid=messages]");
    new MutationObserver(() => {
      const answers = log.querySelectorAll("[data-testid=message][data-role=assistant]");
      const last = answers[answers.length - 1];
      if (last && last.dataset.state === "streaming") {
        window.__lengths.push(last.querySelector("[data-testid=message-text]").textContent.length);
      }
    }).observe(log, { subtree: true, childList: true, characterData: true, attributes: true });
  });
}

const text = (testid) => page.textContent(`[data-testid=${testid}]`);
const optionValues = (testid) =>
  page.$$eval(`[data-testid=${testid}] option`, (options) => options.map((option) => option.value));

async function chatScenario() {
  const out = {};
  await open();
  out.kbOptions = await optionValues("kb-select");
  await page.selectOption("[data-testid=kb-select]", args.kb);
  out.agentOptions = await optionValues("agent-select");
  await page.selectOption("[data-testid=agent-select]", args.agent);
  out.sessionId = await text("session-id");

  await watchStreaming();
  out.answer = await ask(args.question);
  out.partialLengths = await page.evaluate(() => window.__lengths);
  await page.screenshot({ path: args.screenshot, fullPage: true });

  await reload();
  out.selectionAfterReload = {
    kb: await page.inputValue("[data-testid=kb-select]"),
    agent: await page.inputValue("[data-testid=agent-select]"),
  };
  out.afterReload = await messages();

  // Rejected before the stream opens (HTTP 400): the message comes back for editing, nothing is added.
  await page.fill("[data-testid=message-input]", args.tooLong);
  await page.click("[data-testid=send]");
  await page.waitForSelector("[data-testid=notice]:not([hidden])");
  out.rejected = {
    notice: await text("notice"),
    messages: (await messages()).length,
    inputLength: (await page.inputValue("[data-testid=message-input]")).length,
  };

  // Stop: abort the fetch once a few tokens arrived.
  await page.fill("[data-testid=message-input]", args.stopQuestion);
  await page.click("[data-testid=send]");
  await page.waitForFunction(() => {
    const answers = document.querySelectorAll("[data-testid=message][data-role=assistant]");
    return answers[answers.length - 1].querySelector("[data-testid=message-text]").textContent.length >= 6;
  });
  await page.click("[data-testid=stop]");
  await page.waitForSelector("[data-testid=message][data-role=assistant][data-state=stopped]");
  out.stopped = (await messages()).at(-1);
  // The server stores the partial answer when it sees the disconnect; wait for it before going on.
  await page.waitForFunction(
    async (session) => {
      const response = await fetch(`/api/v1/conversations/${session}/messages`);
      return response.ok && (await response.json()).messages.length === 4;
    },
    out.sessionId,
    { polling: 100 },
  );

  // The model fails mid-answer: an `error` event, then `done`.
  out.failed = await ask(args.errorQuestion);

  await reload();
  out.historyWithPartials = await messages();

  await page.click("[data-testid=clear]");
  await page.waitForFunction(() => document.querySelectorAll("[data-testid=message]").length === 0);
  out.afterClear = { messages: (await messages()).length, status: await text("status") };
  await reload();
  out.afterClearReload = (await messages()).length;

  await page.click("[data-testid=new-conversation]");
  out.newSessionId = await text("session-id");
  return out;
}

async function authScenario() {
  const out = {};
  await open();
  out.noticeWithoutKey = await text("notice");
  await page.click("details summary");
  await page.fill("[data-testid=api-key]", args.apiKey);
  await page.click("[data-testid=save-key]");
  await page.waitForFunction(() => document.querySelectorAll("[data-testid=kb-select] option").length > 2);
  out.noticeHidden = await page.$eval("[data-testid=notice]", (notice) => notice.hidden);
  out.kbOptions = await optionValues("kb-select");
  out.answer = await ask(args.question);
  await page.screenshot({ path: args.screenshot, fullPage: true });
  // A KB asked for that the router may override but finds nothing better than; then, with no KB asked for, a
  // guess the router is not sure enough of.
  await page.selectOption("[data-testid=kb-select]", args.kb);
  out.keptRoute = (await ask(args.offTopicQuestion)).route;
  await page.selectOption("[data-testid=kb-select]", "");
  out.unsureRoute = (await ask(args.unsureQuestion)).route;
  return out;
}

// The API's page with every request that leaves the server refused, as on a machine without internet.
async function docsScenario() {
  const origin = new URL(args.baseUrl).origin;
  const refused = [];
  await page.route("**/*", (route) => {
    if (new URL(route.request().url()).origin === origin) return route.continue();
    refused.push(route.request().url());
    return route.abort("internetdisconnected");
  });
  const out = { refused };
  await page.goto(args.baseUrl + "/docs");
  await page.waitForSelector(".opblock");
  out.swaggerOperations = await page.$$eval(".opblock", (blocks) => blocks.length);
  out.swaggerTitle = await page.$eval(".information-container .title", (title) => title.textContent);
  await page.screenshot({ path: args.screenshot });
  return out;
}

async function saveKey(key) {
  await page.$eval("[data-testid=api-key]", (input) => (input.closest("details").open = true));
  await page.fill("[data-testid=api-key]", key);
  await page.click("[data-testid=save-key]");
  await page.waitForFunction(() => document.querySelectorAll("[data-testid=kb-select] option").length > 2);
}

// A user uploads a file, sees its job finish, asks about it, reads the cited sources and opens the evidence graph.
async function evidenceScenario() {
  const out = {};
  await open();
  await saveKey(args.readerKey);
  await page.waitForSelector("[data-testid=example]");
  out.emptyState = await page.$$eval("[data-testid=kb-card]", (cards) =>
    cards.map((card) => ({
      kb: card.querySelector("h3").textContent,
      description: card.querySelector(".kb-description").textContent,
      examples: [...card.querySelectorAll("[data-testid=example]")].map((b) => b.textContent),
    })),
  );
  await page.screenshot({ path: args.screenshots.empty });

  // Documents, as a reader: the upload is refused with a clear message and nothing pretends it worked.
  await page.click("[data-testid=tab-documents]");
  await page.waitForSelector("[data-testid=document]");
  out.documentsBefore = await page.$$eval("[data-testid=document-title]", (cells) => cells.map((c) => c.textContent));
  await page.setInputFiles("[data-testid=upload-files]", args.uploadPath);
  await page.click("[data-testid=upload]");
  await page.waitForSelector("[data-testid=docs-notice]:not([hidden])");
  out.readerUpload = { notice: await text("docs-notice"), jobHidden: await page.$eval("[data-testid=job]", (j) => j.hidden) };

  // As an administrator: the job is followed to its end, the document is listed and can be read.
  await page.click("[data-testid=tab-chat]");
  await saveKey(args.apiKey);
  await page.click("[data-testid=tab-documents]");
  await page.waitForSelector("[data-testid=document]");
  // The job's first status read is refused as over the rate limit: the page waits it out and goes on polling.
  const polls = [];
  await page.route("**/api/v1/jobs/*", async (route) => {
    polls.push(Date.now());
    if (polls.length > 1) return route.continue();
    const error = { error: { code: "rate_limited", message: "Too many requests; retry after 1 s." } };
    return route.fulfill({ status: 429, headers: { "Retry-After": "1" }, contentType: "application/json", body: JSON.stringify(error) });
  });
  await page.setInputFiles("[data-testid=upload-files]", args.uploadPath);
  await page.click("[data-testid=upload]");
  await page.waitForSelector("[data-testid=job][data-status=done]");
  await page.unroute("**/api/v1/jobs/*");
  out.jobPollGaps = polls.slice(1).map((at, i) => at - polls[i]);
  out.job = {
    status: await text("job-status"),
    progress: await page.$eval("[data-testid=job-progress]", (bar) => [bar.value, bar.max]),
    noticeHidden: await page.$eval("[data-testid=docs-notice]", (notice) => notice.hidden),
  };
  await page.waitForFunction((count) => document.querySelectorAll("[data-testid=document]").length > count, out.documentsBefore.length);
  out.documentsAfter = await page.$$eval("[data-testid=document-title]", (cells) => cells.map((c) => c.textContent));
  const uploaded = page.locator("[data-testid=document]", { hasText: args.uploadTitle });
  await uploaded.locator("[data-testid=document-read]").click();
  await page.waitForSelector("[data-testid=reader]:not([hidden])");
  out.reader = {
    title: await text("reader-title"),
    text: await page.innerText("[data-testid=reader-text]"), // as rendered: what the user sees
    headings: await page.$$eval("[data-testid=reader-text] :is(h3, h4, h5, h6)", (hs) => hs.map((h) => h.textContent)),
    listItems: await page.$$eval("[data-testid=reader-text] li", (items) => items.map((li) => li.textContent)),
    strong: await page.$$eval("[data-testid=reader-text] strong", (bold) => bold.map((b) => b.textContent)),
  };
  await page.screenshot({ path: args.screenshots.documents, fullPage: true });

  // Ask about it, with the KB chosen.
  await page.click("[data-testid=tab-chat]");
  await page.selectOption("[data-testid=kb-select]", args.kb);
  out.answer = await ask(args.question);
  await page.click("[data-testid=message][data-role=assistant] [data-testid=evidence-toggle]");
  await page.waitForSelector("[data-testid=evidence-canvas][data-drawn=true]");
  out.graph = await page.$eval("[data-testid=evidence-canvas]", (canvas) => ({
    nodes: Number(canvas.dataset.nodes),
    edges: Number(canvas.dataset.edges),
    canvases: canvas.querySelectorAll("canvas").length,
    drawnNodes: canvas.graph.body.data.nodes.length,
    drawnEdges: canvas.graph.body.data.edges.length,
    positioned: Object.keys(canvas.graph.getPositions()).length,
  }));
  // Click the first node where it is drawn: its text shows beside the graph.
  await page.locator("[data-testid=evidence-canvas]").scrollIntoViewIfNeeded();
  const box = await page.$eval("[data-testid=evidence-canvas]", (canvas) => {
    const id = canvas.graph.body.data.nodes.getIds()[0];
    const at = canvas.graph.canvasToDOM(canvas.graph.getPositions([id])[id]);
    const rect = canvas.getBoundingClientRect();
    return { x: rect.x + at.x, y: rect.y + at.y };
  });
  await page.mouse.click(box.x, box.y);
  out.detail = await text("evidence-detail");
  await page.locator("[data-testid=evidence]").scrollIntoViewIfNeeded();
  await page.screenshot({ path: args.screenshots.evidence, fullPage: true });

  // A broad question to the graph agent consults community summaries: they are drawn too, linked to their entities.
  await page.selectOption("[data-testid=agent-select]", args.communityAgent);
  out.communityAnswer = await ask(args.communityQuestion);
  await page.selectOption("[data-testid=agent-select]", "");
  const last = "[data-testid=message][data-role=assistant]:last-of-type";
  await page.click(`${last} [data-testid=evidence-toggle]`);
  await page.waitForSelector(`${last} [data-testid=evidence-canvas][data-drawn=true]`);
  out.communityGraph = await page.$eval(`${last} [data-testid=evidence-canvas]`, (canvas) => {
    const nodes = canvas.graph.body.data.nodes.get();
    const edges = canvas.graph.body.data.edges.get();
    const shapeOf = new Map(nodes.map((node) => [node.id, node.shape]));
    return {
      communities: nodes.filter((node) => node.id.startsWith("community:")).map((node) => ({ id: node.id, label: node.label, shape: node.shape })),
      contains: edges.filter((edge) => edge.from.startsWith("community:")).map((edge) => ({ from: edge.from, toShape: shapeOf.get(edge.to), dashes: edge.dashes })),
    };
  });
  out.communitySourceIds = await page.$$eval(`${last} [data-source-id]`, (entries) => entries.map((e) => e.dataset.sourceId));
  // Clicking a community shows its summary beside the graph.
  await page.locator(`${last} [data-testid=evidence-canvas]`).scrollIntoViewIfNeeded();
  const at = await page.$eval(`${last} [data-testid=evidence-canvas]`, (canvas) => {
    const id = canvas.graph.body.data.nodes.getIds().find((node) => node.startsWith("community:"));
    const point = canvas.graph.canvasToDOM(canvas.graph.getPositions([id])[id]);
    const rect = canvas.getBoundingClientRect();
    return { x: rect.x + point.x, y: rect.y + point.y };
  });
  await page.mouse.click(at.x, at.y);
  out.communityDetail = await page.textContent(`${last} [data-testid=evidence-detail]`);

  // A new conversation shows the start screen again; an example question asks itself.
  await page.click("[data-testid=new-conversation]");
  await page.waitForSelector("[data-testid=empty-state]:not([hidden]) [data-testid=example]");
  const example = await page.textContent("[data-testid=example]");
  await page.click("[data-testid=example]");
  await page.waitForSelector("[data-testid=message][data-role=assistant][data-state=done]");
  out.example = { asked: example, messages: await messages(), emptyHidden: await page.$eval("[data-testid=empty-state]", (e) => e.hidden) };
  return out;
}

const SCENARIOS = {
  chat: () => chatScenario(),
  auth: () => authScenario(),
  docs: () => docsScenario(),
  evidence: () => evidenceScenario(),
};

try {
  const result = await SCENARIOS[args.scenario]();
  Object.assign(result, { consoleErrors, pageErrors });
  console.log(JSON.stringify(result));
} finally {
  await browser.close();
}
