// Writes the OpenClaw fixture in this folder with OpenClaw's own transcript writer.
//
// OpenClaw 2026.4.29 (the last line that keeps transcripts as JSONL files) appends
// transcripts through SessionManager from @mariozechner/pi-coding-agent 0.70.6, the exact
// version its package.json pins; its session store (sessions.json) and the session-memory
// hook are OpenClaw's own code. Run from a folder where those packages are installed:
//
//   npm install --ignore-scripts @mariozechner/pi-coding-agent@0.70.6
//   OPENCLAW_DIST=/path/to/node_modules/openclaw/dist   # optional, see README.md
//   node make_fixture.mjs OUT_DIR
//
// OUT_DIR gets workspace/ and agents/ laid out as ~/.openclaw/ has them.
import fs from "node:fs";
import path from "node:path";
import { SessionManager, CURRENT_SESSION_VERSION } from "@mariozechner/pi-coding-agent";

const out = path.resolve(process.argv[2] ?? ".");
const workspace = path.join(out, "workspace");
const sessionsDir = path.join(out, "agents", "main", "sessions");
fs.mkdirSync(path.join(workspace, "memory"), { recursive: true });
fs.mkdirSync(sessionsDir, { recursive: true });

const usage = { input: 12, output: 34, cacheRead: 0, cacheWrite: 0, totalTokens: 46,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
// recent times: OpenClaw's session-store maintenance prunes entries idle for weeks (and
// renames their transcripts to *.jsonl.deleted.<time>)
const T0 = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 2 * 3_600_000;
const at = (minutes) => T0 + minutes * 60_000;
const assistant = (content, minutes, stopReason = "stop") => ({
  role: "assistant", content, api: "openai-responses", provider: "openai", model: "gpt-5.4",
  usage, stopReason, timestamp: at(minutes) });

// OpenClaw's ensureSessionHeader (src/config/sessions/transcript.ts): the header line is
// written first, then SessionManager.open() appends to the file.
function openTranscript(sessionId) {
  const file = path.join(sessionsDir, `${sessionId}.jsonl`);
  const header = { type: "session", version: CURRENT_SESSION_VERSION, id: sessionId,
    timestamp: new Date().toISOString(), cwd: workspace };
  fs.writeFileSync(file, `${JSON.stringify(header)}\n`, { encoding: "utf-8", mode: 0o600 });
  return { file, sm: SessionManager.open(file) };
}

// session 1: the main direct chat, with a tool call, a tool result, an image, thinking,
// a compaction and a session name
const main = openTranscript("3f6c2a9e-5b1d-4e7a-9c0f-1a2b3c4d5e6f");
main.sm.appendMessage({ role: "user", content: "Remember that my sister Ana lives in Lisbon.",
  timestamp: at(0) });
main.sm.appendMessage(assistant([
  { type: "thinking", thinking: "The user wants this stored in memory." },
  { type: "toolCall", id: "call_1", name: "edit",
    arguments: { path: "memory/2026-04-29.md", append: "- Ana (sister) lives in Lisbon" } },
], 1, "toolUse"));
main.sm.appendMessage({ role: "toolResult", toolCallId: "call_1", toolName: "edit",
  content: [{ type: "text", text: "Appended 1 line to memory/2026-04-29.md" }],
  isError: false, timestamp: at(1) });
main.sm.appendMessage(assistant([{ type: "text", text: "Noted: Ana lives in Lisbon." }], 2));
main.sm.appendMessage({ role: "user", content: [
  { type: "text", text: "What is in this picture? My key is sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd" },
  { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
], timestamp: at(10) });
main.sm.appendMessage(assistant([{ type: "text", text: "A tram in Lisbon. Please rotate that key." }], 11));
const firstKept = main.sm.getLeafId();
main.sm.appendCompaction("Ana, the user's sister, lives in Lisbon; the user sent a tram photo.",
  firstKept, 4200);
main.sm.appendSessionInfo("Lisbon notes");
main.sm.appendMessage({ role: "user", content: "Thanks!", timestamp: at(20) });
main.sm.appendMessage(assistant([{ type: "text", text: "Any time." }], 21));

// session 2: a group chat on a thread (file name <id>-topic-<thread>.jsonl)
const groupId = "9a8b7c6d-0000-4000-8000-00000000beef";
const groupFile = path.join(sessionsDir, `${groupId}-topic-42.jsonl`);
fs.writeFileSync(groupFile, `${JSON.stringify({ type: "session", version: CURRENT_SESSION_VERSION,
  id: groupId, timestamp: new Date().toISOString(), cwd: workspace })}\n`, { mode: 0o600 });
const group = SessionManager.open(groupFile);
group.appendMessage({ role: "user", content: "Who is on call this weekend?", timestamp: at(30) });
group.appendMessage(assistant([{ type: "text", text: "Marta is on call this weekend." }], 31));

// sessions.json: OpenClaw's session store, sessionKey -> SessionEntry (src/config/sessions.ts)
const store = {
  "agent:main:main": { sessionId: main.sm.getSessionId(), updatedAt: at(21),
    sessionStartedAt: at(0), sessionFile: main.file, chatType: "direct",
    label: "Lisbon notes", lastChannel: "telegram", compactionCount: 1 },
  "agent:main:telegram:group:-100123:topic:42": { sessionId: groupId, updatedAt: at(31),
    sessionStartedAt: at(30), sessionFile: groupFile, chatType: "group",
    displayName: "Ops team", subject: "On call", channel: "telegram" },
};
const storePath = path.join(sessionsDir, "sessions.json");
const dist = process.env.OPENCLAW_DIST;
if (dist) {
  // OpenClaw's own writers: the session store, a delivery-mirror message appended to the
  // main transcript (src/config/sessions/transcript.ts)
  const { updateSessionStore } = await import(path.join(dist, "plugin-sdk", "config-runtime.js"));
  await updateSessionStore(storePath, (s) => { Object.assign(s, store); });
  const transcript = fs.readdirSync(dist).find((n) => /^transcript-[A-Za-z0-9_-]+\.js$/.test(n));
  const { t: appendAssistantMessageToSessionTranscript } = await import(path.join(dist, transcript));
  const mirrored = await appendAssistantMessageToSessionTranscript({ agentId: "main",
    sessionKey: "agent:main:main", storePath, text: "Reminder: trains to Lisbon leave at 9." });
  if (!mirrored.ok) throw new Error(`mirror failed: ${mirrored.reason}`);
} else {
  fs.writeFileSync(storePath, JSON.stringify(store, null, 2));
}

// the workspace: MEMORY.md and daily logs are written by the agent with its file tools
// (free Markdown), so they are written here as an agent would
fs.writeFileSync(path.join(workspace, "MEMORY.md"),
  "# Long-term memory\n\n## People\n\n- Ana (sister) lives in Lisbon.\n\n## Preferences\n\n- Prefers short answers.\n");
fs.writeFileSync(path.join(workspace, "memory", "2026-04-28.md"),
  "# 2026-04-28\n\n## 09:12 Morning check-in\n\n- Asked for the weather in Porto.\n- Wants reminders at 8am.\n\n## 18:40 Trip planning\n\nLooking at trains to Lisbon for May.\n\n```md\n## not a heading: inside a fence\n```\n");
fs.writeFileSync(path.join(workspace, "memory", "2026-04-29.md"),
  "- Ana (sister) lives in Lisbon\n");
// what OpenClaw's bundled session-memory hook (dist/bundled/session-memory/handler.js)
// writes on /new: memory/<date>-<slug>.md, the slug an LLM's or the local time's HHMM. Its
// module needs Node >= 22 (undici), so its exact output format is reproduced here.
const when = new Date(at(22));
const date = when.toISOString().slice(0, 10);
const time = when.toISOString().slice(11, 19);
fs.writeFileSync(path.join(workspace, "memory", `${date}-${time.slice(0, 5).replace(":", "")}.md`), [
  `# Session: ${date} ${time} UTC`, "",
  "- **Session Key**: agent:main:main",
  `- **Session ID**: ${main.sm.getSessionId()}`,
  "- **Source**: telegram", "",
  "## Conversation Summary", "",
  "user: Remember that my sister Ana lives in Lisbon.\nassistant: Noted: Ana lives in Lisbon.\nuser: Thanks!\nassistant: Any time.",
  ""].join("\n"));
console.log(`wrote ${out}`);
