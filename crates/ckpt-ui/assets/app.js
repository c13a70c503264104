// ckpt ui: the page's script. Plain JS, no dependencies, no build step.
//
// Every piece of workspace data (file names, messages, tags, contents) is
// put into the page with textContent or as a text node (`el` below): never
// parsed as HTML. Every request carries the run's token (from the page's
// own <meta>); actions are POSTs with a JSON body, which the server checks
// against its Origin. The server answers with the operations' reports,
// serialised as `ckpt … --json` prints them (docs/CLI.md, "JSON output"),
// plus `kind` on hook-made checkpoint records (see "agent sessions").
'use strict';

const TOKEN = document.querySelector('meta[name="ckpt-token"]').content;
const PAGE = 200;
const S = {
  items: [], head: null, more: false, total: 0, sel: -1, readOnly: true,
  search: '', path: '', session: '', view: 'timeline', shown: null, loading: false,
};
const $ = (id) => document.getElementById(id);

// Builds an element. `attrs`: class, text (textContent), on* handlers, other
// attributes (set as attribute text). Children: nodes or strings (strings
// become text nodes).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined && k !== false) e.append(k);
  return e;
}

function clear(node, ...kids) { node.replaceChildren(...kids.flat().filter((k) => k)); }

async function api(path, params) {
  const u = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, v);
  }
  const r = await fetch(u, { headers: { 'X-Ckpt-Token': TOKEN } });
  return answer(r);
}

async function post(path, body) {
  const r = await fetch(path, {
    method: 'POST',
    headers: { 'X-Ckpt-Token': TOKEN, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return answer(r);
}

async function answer(r) {
  const text = await r.text();
  let j;
  try { j = JSON.parse(text); } catch (_) { j = { error: text || r.statusText }; }
  if (!r.ok) throw new Error(j.error || r.statusText);
  return j;
}

// ---- formatting -----------------------------------------------------------

function bytes(n) {
  if (n === undefined || n === null) return '';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0; let v = n;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (i === 0 ? String(v) : v.toFixed(v < 10 ? 1 : 0)) + ' ' + u[i];
}

function ago(ns) {
  const s = Math.max(0, (Date.now() - ns / 1e6) / 1000);
  if (s < 45) return 'just now';
  if (s < 90) return '1 min ago';
  if (s < 3600) return Math.round(s / 60) + ' min ago';
  if (s < 86400) return Math.round(s / 3600) + ' h ago';
  return Math.round(s / 86400) + ' d ago';
}

function exact(ns) { return new Date(ns / 1e6).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC'); }

// A path from a report: its text, and the hex of its bytes when they are
// not UTF-8 (sent back as path_hex so no name is lost).
const pathOf = (c) => ({ text: c.path, hex: c.path_hex });
const pathParams = (p) => (p.hex ? { path_hex: p.hex } : { path: p.text });

function note(msg, kind) {
  const n = $('detail').querySelector('.status') || el('p', { class: 'status' });
  n.className = 'status ' + (kind || '');
  n.textContent = msg;
  if (!n.isConnected) $('detail').prepend(n);
}

function fail(e) { note(String(e.message || e), 'error'); }

// ---- timeline -------------------------------------------------------------

// ---- agent sessions --------------------------------------------------------
//
// Checkpoints made by `ckpt hook` carry the tags `harness`, `session`,
// `event` and `tool`, and the server adds `kind`: what the event means
// (`prompt`, `before_tool`, `after_tool`, `turn_end`, `other`), so no list
// of harness event names lives here. A prompt checkpoint's message is
// `prompt: TEXT`. An after-tool checkpoint is a tool call that changed
// files; its `parent` is the state just before the call.

function session(c) { return (c.tags && c.tags.session) || ''; }

const shortId = (s) => (s.length > 12 ? s.slice(0, 8) + '\u2026' : s);

function promptText(c) {
  const m = c.message || '';
  return m.startsWith('prompt: ') ? m.slice(8) : m;
}

// The turn of each listed checkpoint (newest first): the newest prompt
// checkpoint of its session at or before it, null when none is listed.
function turns(items) {
  const last = new Map();
  const t = new Array(items.length).fill(null);
  for (let i = items.length - 1; i >= 0; i--) {
    const c = items[i]; const s = session(c);
    if (!s) continue;
    if (c.kind === 'prompt') last.set(s, c);
    t[i] = last.get(s) || null;
  }
  return t;
}

// A run of checkpoints of one session: harness, short session id (the
// whole id on hover) and a button filtering the timeline to it (or back).
function sessionHeader(c) {
  const s = session(c);
  if (!s) return el('li', { class: 'group' }, el('span', { text: 'no agent session' }));
  const on = S.session === s;
  return el('li', { class: 'group session', 'data-session': s, title: 'session ' + s },
    el('span', { class: 'harness', text: (c.tags.harness || 'agent') }), ' session ',
    el('span', { class: 'sid mono', text: shortId(s) }), ' ',
    el('button', { type: 'button', class: 'link session-filter', onclick: () => setSession(on ? '' : s).catch(fail), text: on ? 'all sessions' : 'only this session' }));
}

// A turn within a session: its prompt's text (null `p`: the checkpoints of
// the session from before its first listed prompt).
function turnHeader(p) {
  return el('li', { class: 'group turn', 'data-prompt': p ? p.id : '' },
    p ? el('span', { class: 'prompt', title: p.id + ': ' + (p.message || ''), text: '\u203a ' + promptText(p) })
      : el('span', { class: 'muted', text: 'before the first prompt shown' }));
}

async function setSession(s) {
  S.session = s;
  $('session').value = s;
  await reload();
}

// A tool call that changed files, with the state before it recorded, can
// be undone from the page.
const undoable = (c) => !S.readOnly && c.kind === 'after_tool' && !!c.parent;

// "Undo this step": open the step, then the restore flow (dry-run list,
// confirm, then Undo) to its parent, the state just before the call.
async function undoStep(c, i) {
  if (i !== undefined) select(i);
  if (!S.shown || S.shown.id !== c.id) await showCheckpoint(c.id);
  await restoreFlow(c.parent, [], null, c);
}

function tagChips(c) {
  return Object.entries(c.tags || {})
    .filter(([k]) => k !== 'session')
    .map(([k, v]) => el('span', { class: 'tag', title: k + '=' + v, text: k + '=' + v }));
}

// Annotations (tags and a note added after the save, `ckpt annotate`):
// marked with a pencil and styled apart from the save-time tags.
const PENCIL = '\u270e ';
function annChips(c) {
  const a = c.annotations;
  if (!a) return [];
  return Object.entries(a.tags).map(([k, v]) => el('span', { class: 'tag ann', title: 'annotated ' + exact(a.time_ns) + ': ' + k + '=' + v, text: PENCIL + k + '=' + v }))
    .concat(a.note ? [el('span', { class: 'tag ann note', title: a.note, text: PENCIL + a.note })] : []);
}

function row(c, i) {
  const s = c.stats || {};
  return el('li', {
    class: 'cp' + (i === S.sel ? ' sel' : '') + (c.head ? ' head' : ''),
    'data-seq': c.seq, 'data-id': c.id,
    onclick: () => { select(i); openSelected(); },
  },
  el('span', { class: 'id' }, c.id, c.head ? el('span', { class: 'badge head-badge', text: 'HEAD' }) : null),
  el('span', { class: 'time', title: exact(c.time_ns), 'data-ns': c.time_ns, text: ago(c.time_ns) }),
  el('span', { class: 'msg', text: c.message || '(no message)' }),
  el('span', { class: 'counts' },
    el('span', { class: 'add', text: '+' + (s.files_added || 0) }),
    el('span', { class: 'mod', text: '~' + (s.files_modified || 0) }),
    el('span', { class: 'del', text: '\u2212' + (s.files_deleted || 0) })),
  el('span', { class: 'bytes', title: 'bytes added to the store', text: bytes(s.new_bytes || 0) }),
  el('span', { class: 'tags' }, tagChips(c), annChips(c),
    undoable(c) ? el('button', {
      type: 'button', class: 'link undo-step', title: 'restore the workspace to ' + c.parent + ', the state just before this tool call',
      onclick: (e) => { e.stopPropagation(); undoStep(c, i).catch(fail); }, text: 'Undo this step\u2026',
    }) : null));
}

function render() {
  const list = $('timeline');
  const frag = document.createDocumentFragment();
  const turn = turns(S.items);
  let prev = null; let prevTurn = null;
  S.items.forEach((c, i) => {
    const sess = session(c);
    if (i === 0 || sess !== prev) { frag.append(sessionHeader(c)); prevTurn = null; }
    if (sess && turn[i] !== prevTurn) frag.append(turnHeader(turn[i]));
    prev = sess; prevTurn = turn[i];
    frag.append(row(c, i));
  });
  list.replaceChildren(frag);
  const f = [S.search && 'matching "' + S.search + '"', S.path && 'changing ' + S.path,
    S.session && 'in session ' + S.session].filter(Boolean).join(', ');
  $('summary').textContent = S.items.length + ' shown' + (f ? ' ' + f : '') + ' of ' + S.total +
    ' checkpoints' + (S.head ? ', HEAD ' + S.head : '');
  $('more').hidden = !S.more;
}

function query(before) {
  return { limit: PAGE, before, search: S.search, path: S.path, session: S.session };
}

async function reload() {
  const r = await api('/api/log', query());
  S.items = r.checkpoints; S.head = r.head; S.more = r.more; S.total = r.total;
  S.sel = Math.min(S.sel, S.items.length - 1);
  render();
}

async function older() {
  if (S.loading || !S.more || !S.items.length) return;
  S.loading = true;
  try {
    const r = await api('/api/log', query(S.items[S.items.length - 1].seq));
    S.items = S.items.concat(r.checkpoints); S.more = r.more; S.total = r.total; S.head = r.head;
    render();
  } finally { S.loading = false; }
}

// The catalog changed (any process): fetch the newest page and put what is
// new on top; anything else (a delete, a gc) reloads the list.
async function refresh() {
  const r = await api('/api/log', query());
  const top = S.items.length ? S.items[0].seq : 0;
  const fresh = r.checkpoints.filter((c) => c.seq > top);
  const rest = r.checkpoints.filter((c) => c.seq <= top);
  const same = rest.every((c, i) => S.items[i] && S.items[i].seq === c.seq);
  if (!same) { await reload(); return; }
  const head = r.head;
  // The newest page's records replace ours (their annotations may have
  // changed); older ones only get the new HEAD mark.
  S.items = fresh.concat(rest, S.items.slice(rest.length).map((c) => Object.assign(c, { head: c.id === head })));
  if (S.sel >= 0) S.sel += fresh.length;
  S.head = head; S.total = r.total;
  if (!S.items.length) S.more = r.more;
  render();
}

function select(i) {
  if (i < 0 || i >= S.items.length) return;
  S.sel = i;
  for (const n of $('timeline').querySelectorAll('li.cp.sel')) n.classList.remove('sel');
  const n = $('timeline').querySelector('li.cp[data-seq="' + S.items[i].seq + '"]');
  if (n) { n.classList.add('sel'); n.scrollIntoView({ block: 'nearest' }); }
  if (i > S.items.length - 20) older().catch(fail);
}

function openSelected() {
  const c = S.items[S.sel];
  if (c) { setView('timeline'); showCheckpoint(c.id).catch(fail); }
}

// ---- one checkpoint -------------------------------------------------------

// Changed paths as a tree: directories hold their children, files are leaves.
function pathTree(changes) {
  const root = { dirs: new Map(), files: [] };
  for (const c of changes) {
    const parts = c.path.split('/');
    let n = root;
    for (const d of parts.slice(0, -1)) {
      if (!n.dirs.has(d)) n.dirs.set(d, { dirs: new Map(), files: [] });
      n = n.dirs.get(d);
    }
    n.files.push({ name: parts[parts.length - 1], change: c });
  }
  return root;
}

function treeList(node, onFile) {
  const ul = el('ul', { class: 'tree' });
  for (const [name, sub] of [...node.dirs.entries()].sort()) {
    ul.append(el('li', { class: 'dir' }, el('span', { class: 'dirname', text: name + '/' }), treeList(sub, onFile)));
  }
  for (const f of node.files) {
    const c = f.change;
    ul.append(el('li', { class: 'file ' + c.status },
      el('button', { type: 'button', class: 'link', 'data-path': c.path, onclick: () => onFile(c) },
        el('span', { class: 'st', text: c.status[0].toUpperCase() }), ' ', f.name)));
  }
  return ul;
}

async function showCheckpoint(id) {
  const r = await api('/api/show', { id });
  S.shown = r;
  const d = $('detail');
  const parent = r.parent;
  const s = r.stats;
  const actions = S.readOnly ? null : el('div', { class: 'actions' },
    undoable(r) ? el('button', { type: 'button', id: 'act-undo-step', onclick: () => undoStep(r).catch(fail), text: 'Undo this step\u2026' }) : null,
    el('button', { type: 'button', id: 'act-restore', onclick: () => restoreFlow(r.id, []).catch(fail), text: 'Restore workspace to ' + r.id + '\u2026' }),
    el('button', { type: 'button', id: 'act-fork', onclick: () => forkFlow(r.id).catch(fail), text: 'Fork\u2026' }),
    el('button', { type: 'button', id: 'act-delete', class: 'danger', onclick: () => deleteFlow(r.id).catch(fail), text: 'Delete\u2026' }));
  const diffBox = el('div', { id: 'diff' });
  const stateBox = el('div', { id: 'state' });
  d.dataset.id = r.id;
  clear(d,
    el('h2', {}, el('span', { text: r.id }), r.head ? el('span', { class: 'badge head-badge', text: 'HEAD' }) : null),
    el('p', { class: 'msg-big', text: r.message || '(no message)' }),
    el('dl', { class: 'meta' },
      el('dt', { text: 'time' }), el('dd', { text: exact(r.time_ns) + ' (' + ago(r.time_ns) + ')' }),
      el('dt', { text: 'parent' }), el('dd', { text: parent || '(none)' }),
      el('dt', { text: 'hash' }), el('dd', { class: 'mono', text: r.hash }),
      el('dt', { text: 'changes' }), el('dd', { text: '+' + s.files_added + ' ~' + s.files_modified + ' \u2212' + s.files_deleted + ', ' + bytes(s.new_bytes) + ' added to the store' }),
      el('dt', { text: 'tags' }), el('dd', {}, Object.entries(r.tags).map(([k, v]) => el('span', { class: 'tag', text: k + '=' + v }))),
      el('dt', { text: 'annotations' }), el('dd', { id: 'annotations' })),
    S.readOnly ? null : el('div', { class: 'actions annotate' },
      el('input', { id: 'ann-tag', placeholder: 'key=value', 'aria-label': 'tag to add' }),
      el('button', { type: 'button', id: 'act-tag', onclick: () => addTag(r.id).catch(fail), text: 'Add tag' }),
      el('textarea', { id: 'ann-note', rows: 2, placeholder: 'note', 'aria-label': 'note' }),
      el('button', { type: 'button', id: 'act-note', onclick: () => saveNote(r.id).catch(fail), text: 'Save note' })),
    el('div', { class: 'actions' },
      el('button', { type: 'button', onclick: () => compareFlow(r.id, '').catch(fail), text: 'Compare with working directory' })),
    actions,
    el('h3', { text: 'Changed paths (' + r.changes.length + ')' }),
    r.changes.length ? treeList(pathTree(r.changes), (c) => showDiff(parent, r.id, c).catch(fail)) : el('p', { class: 'muted', text: 'nothing changed' }),
    stateBox, diffBox);
  renderAnnotations(r.id, r.annotations);
  if (parent) {
    api('/api/diff', { from: parent, to: r.id }).then((df) => renderState(stateBox, df.state_changes)).catch(() => {});
  }
}

// The shown checkpoint's annotations, each tag with a remove button
// (not in read-only mode); the note box holds the current note.
function renderAnnotations(id, a) {
  const box = $('annotations');
  if (!box) return;
  const tags = Object.entries((a && a.tags) || {});
  clear(box,
    tags.map(([k, v]) => el('span', { class: 'tag ann', 'data-key': k },
      PENCIL + k + '=' + v,
      S.readOnly ? null : el('button', { type: 'button', class: 'link remove-tag', title: 'remove ' + k, onclick: () => annotate(id, { remove: [k] }).catch(fail), text: ' \u00d7' }))),
    a && a.note ? el('p', { class: 'note', id: 'note-text', text: a.note }) : null,
    a ? el('span', { class: 'muted', text: 'changed ' + exact(a.time_ns) }) : el('span', { class: 'muted', text: 'none' }));
  const n = $('ann-note');
  if (n) n.value = (a && a.note) || '';
}

async function annotate(id, body) {
  const r = await post('/api/annotate', Object.assign({ id }, body));
  renderAnnotations(id, r.annotations);
  return r;
}

async function addTag(id) {
  const t = $('ann-tag').value.trim();
  const i = t.indexOf('=');
  if (i <= 0) { note('A tag is key=value.', 'error'); return; }
  await annotate(id, { set: { [t.slice(0, i)]: t.slice(i + 1) } });
  $('ann-tag').value = '';
}

async function saveNote(id) { await annotate(id, { note: $('ann-note').value }); }

function pretty(v) {
  if (!v) return '';
  const t = v.value;
  try { return JSON.stringify(JSON.parse(t), null, 2); } catch (_) { return t; }
}

function renderState(box, changes) {
  if (!changes || !changes.length) { clear(box); return; }
  clear(box, el('h3', { text: 'Agent state (' + changes.length + ' keys)' }),
    el('ul', { class: 'state' }, changes.map((c) => el('li', { class: c.status },
      el('span', { class: 'st', text: c.status }), ' ', el('code', { text: c.key }),
      el('div', { class: 'kv' },
        c.old ? el('pre', { class: 'old', text: pretty(c.old) }) : null,
        c.new ? el('pre', { class: 'new', text: pretty(c.new) }) : null)))));
}

const IMAGE = /\.(png|jpe?g|gif|svg)$/i;

// The diff of one path between `from` and `to` (to '' = working directory;
// with `fork`, `to` is the fork's checkpoint, '' its head).
async function showDiff(from, to, change, fork) {
  const p = pathOf(change);
  const box = $('diff');
  clear(box, el('p', { class: 'muted', text: 'loading diff of ' + p.text + '\u2026' }));
  let r = { changes: [] };
  if (from) r = await api('/api/diff', Object.assign({ from, to, fork, content: true }, pathParams(p)));
  const c = r.changes.find((x) => x.path === change.path) || change;
  const toLabel = fork ? (r.to || fork) : (to || 'working directory');
  const head = el('div', { class: 'diff-head' },
    el('h3', {}, el('span', { text: p.text }), el('span', { class: 'muted', text: '  ' + (from || '(empty)') + ' \u2192 ' + toLabel })),
    el('div', { class: 'actions' },
      el('button', { type: 'button', onclick: () => historyOf(p.text), text: 'History of this path' }),
      (!S.readOnly && to && !fork) ? el('button', { type: 'button', id: 'act-restore-path', onclick: () => restoreFlow(to, [p]).catch(fail), text: 'Restore this path to ' + to + '\u2026' }) : null,
      el('label', {}, el('input', { type: 'checkbox', id: 'side', checked: S.side, onchange: (e) => { S.side = e.target.checked; showDiff(from, to, change, fork).catch(fail); } }), ' side by side')));
  const body = el('div', { class: 'diff-body' });
  clear(box, head, body);
  // A fork's files are in its own store, which /api/file does not read.
  if (IMAGE.test(p.text) && !fork) {
    const img = (id, e) => (e && e.kind === 'file') ? el('figure', {},
      el('img', { alt: p.text + ' at ' + id, src: '/api/file?' + new URLSearchParams(Object.assign({ token: TOKEN, id }, pathParams(p))) }),
      el('figcaption', { text: id + ': ' + bytes(e.size) })) : el('figure', {}, el('figcaption', { text: id + ': absent' }));
    body.append(el('div', { class: 'images' }, img(from || '(none)', from && c.old), img(to || 'workdir', to && c.new)));
  }
  if (c.binary || c.diff === undefined) {
    const side = (name, e) => el('li', { text: name + ': ' + (e ? (e.kind === 'file' ? bytes(e.size) + ' (' + e.size + ' bytes), hash ' + e.hash : e.kind) : 'absent') });
    body.append(el('ul', { class: 'binary' }, side('before', c.old), side('after', c.new)));
    return;
  }
  renderUnified(body, c.diff, S.side);
}

// Renders unified diff text with line numbers and in-line change marks,
// unified or side by side. Up to VIRTUAL rows are built at once (long
// lines wrap); a longer diff is windowed (`windowed`): only the rows on
// screen, plus a margin, are in the DOM.
const VIRTUAL = 1500;

function renderUnified(body, text, side) {
  const lines = text.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  const rows = [];
  let o = 0; let n = 0;
  for (const l of lines) {
    if (l.startsWith('---') || l.startsWith('+++')) continue;
    const m = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(l);
    if (m) { o = +m[1]; n = +m[2]; rows.push({ t: 'hunk', s: l }); continue; }
    const ch = l[0]; const s = l.slice(1);
    if (ch === '-') rows.push({ t: 'del', o: o++, s });
    else if (ch === '+') rows.push({ t: 'add', n: n++, s });
    else if (ch === '\\') rows.push({ t: 'note', s: l });
    else rows.push({ t: 'ctx', o: o++, n: n++, s });
  }
  markPairs(rows);
  const out = side ? sideRows(rows) : rows;
  const make = side ? sideRow : unifiedRow;
  const virtual = out.length > VIRTUAL;
  const cols = side ? ['ln', 'code', 'ln', 'code'] : ['ln', 'ln', 'code'];
  const table = el('table', { class: 'diff' + (side ? ' side' : '') + (virtual ? ' virtual' : '') },
    el('colgroup', {}, cols.map((c) => el('col', { class: 'c-' + c }))));
  const tb = document.createElement('tbody');
  table.append(tb);
  if (!virtual) {
    for (const r of out) tb.append(make(r));
    body.append(table);
    table.dataset.first = String(performance.now());
    table.dataset.done = String(out.length);
    return;
  }
  windowed(body, table, tb, out, make, side);
}

// A long diff: rows of one fixed height (lines do not wrap; the table is as
// wide as the longest line and scrolls sideways), drawn for the part of
// the table inside #detail's viewport plus OVER rows each side, between
// two spacer rows that keep the scroll height of the whole diff. Redrawn
// on scroll and resize (once per frame), and dropped with the table.
const OVER = 80;

function windowed(body, table, tb, out, make, side) {
  const len = (r) => (r && r.s ? r.s.length : 0);
  let longest = 0;
  for (const r of out) longest = Math.max(longest, side ? Math.max(len(r.l), len(r.r)) : len(r));
  table.style.width = side ? 'calc(9em + ' + (2 * longest + 4) + 'ch)' : 'calc(9em + ' + (longest + 3) + 'ch)';
  body.append(el('div', { class: 'diff-scroll' }, table));
  const scroller = $('detail');
  const pad = () => el('tr', { class: 'pad' }, el('td', { colspan: side ? 4 : 3 }));
  const top = pad(); const bottom = pad();
  let h = 0; let lo = -1; let hi = -1; let queued = false;
  const draw = () => {
    queued = false;
    if (!table.isConnected) { scroller.removeEventListener('scroll', later); window.removeEventListener('resize', later); return; }
    const above = scroller.getBoundingClientRect().top - tb.getBoundingClientRect().top;
    const rh = h || 20;
    const first = Math.max(0, Math.min(out.length, Math.floor(above / rh) - OVER));
    const last = Math.max(first, Math.min(out.length, Math.ceil((above + scroller.clientHeight) / rh) + OVER));
    if (first === lo && last === hi) return;
    lo = first; hi = last;
    const frag = document.createDocumentFragment();
    frag.append(top);
    for (let i = first; i < last; i++) frag.append(make(out[i]));
    frag.append(bottom);
    tb.replaceChildren(frag);
    if (!h && last > first) {
      // The real row height, once: redraw if the guess was off.
      h = top.nextSibling.getBoundingClientRect().height || rh;
      if (h !== rh) { lo = -1; draw(); return; }
    }
    top.style.height = (first * rh) + 'px';
    bottom.style.height = ((out.length - last) * rh) + 'px';
    table.dataset.lo = String(first); table.dataset.hi = String(last);
  };
  const later = () => { if (!queued) { queued = true; requestAnimationFrame(draw); } };
  scroller.addEventListener('scroll', later, { passive: true });
  window.addEventListener('resize', later);
  draw();
  table.dataset.first = String(performance.now());
  table.dataset.done = String(out.length);
}

// For each run of deletions followed by as many additions, mark the part of
// each pair that differs (common prefix and suffix left plain).
function markPairs(rows) {
  for (let i = 0; i < rows.length;) {
    if (rows[i].t !== 'del') { i++; continue; }
    let j = i; while (j < rows.length && rows[j].t === 'del') j++;
    let k = j; while (k < rows.length && rows[k].t === 'add') k++;
    for (let x = 0; x < Math.min(j - i, k - j); x++) {
      const a = rows[i + x]; const b = rows[j + x];
      let p = 0; while (p < a.s.length && p < b.s.length && a.s[p] === b.s[p]) p++;
      let q = 0; while (q < a.s.length - p && q < b.s.length - p && a.s[a.s.length - 1 - q] === b.s[b.s.length - 1 - q]) q++;
      if (p + q < Math.max(a.s.length, b.s.length)) { a.mark = [p, a.s.length - q]; b.mark = [p, b.s.length - q]; }
    }
    i = k;
  }
}

function code(r) {
  const td = document.createElement('td');
  td.className = 'code';
  if (!r) return td;
  if (r.mark) {
    td.append(r.s.slice(0, r.mark[0]), el('mark', { text: r.s.slice(r.mark[0], r.mark[1]) }), r.s.slice(r.mark[1]));
  } else td.textContent = r.s;
  return td;
}

function num(v) { const td = document.createElement('td'); td.className = 'ln'; if (v !== undefined) td.textContent = v; return td; }

function unifiedRow(r) {
  const tr = document.createElement('tr');
  tr.className = r.t;
  if (r.t === 'hunk' || r.t === 'note') { const td = el('td', { colspan: 3, text: r.s }); tr.append(td); return tr; }
  const sign = el('span', { class: 'sign', text: r.t === 'add' ? '+' : r.t === 'del' ? '-' : ' ' });
  const c = code(r); c.prepend(sign);
  tr.append(num(r.o), num(r.n), c);
  return tr;
}

function sideRows(rows) {
  const out = [];
  for (let i = 0; i < rows.length;) {
    const r = rows[i];
    if (r.t !== 'del' && r.t !== 'add') { out.push({ l: r, r, t: r.t }); i++; continue; }
    let j = i; while (j < rows.length && rows[j].t === 'del') j++;
    let k = j; while (k < rows.length && rows[k].t === 'add') k++;
    for (let x = 0; x < Math.max(j - i, k - j); x++) out.push({ l: x < j - i ? rows[i + x] : null, r: x < k - j ? rows[j + x] : null, t: 'chg' });
    i = k;
  }
  return out;
}

function sideRow(p) {
  const tr = document.createElement('tr');
  if (p.t === 'hunk' || p.t === 'note') { tr.className = p.t; tr.append(el('td', { colspan: 4, text: p.l.s })); return tr; }
  const l = code(p.l); const r = code(p.r);
  if (p.t === 'chg') { if (p.l) l.classList.add('del'); if (p.r) r.classList.add('add'); }
  tr.append(num(p.l ? p.l.o : undefined), l, num(p.r ? p.r.n : undefined), r);
  return tr;
}

// ---- compare and history --------------------------------------------------

async function compareFlow(from, to) {
  setView('compare');
  $('cmp-from').value = from; $('cmp-to').value = to;
  await runCompare();
}

// A comparison on screen: what it compares, the signature of the last
// answer (redraw only when it changed), and the path whose diff is open.
// With a fork, `to` is a checkpoint of the fork's store ('' its head).
// Against the working directory (`to` empty, no fork) it is live: asked
// again every POLL_MS while the Compare view is open and the page visible,
// and at once when the catalog changes (HEAD may have moved).
const POLL_MS = 1500;

async function runCompare() {
  const from = $('cmp-from').value.trim() || 'HEAD';
  const to = $('cmp-to').value.trim();
  const fork = $('cmp-fork').value.trim();
  S.cmp = { from, to, fork, sig: null, open: null, busy: false };
  clear($('cmp-out'), el('p', { class: 'muted', text: 'comparing\u2026' }));
  await updateCompare();
}

async function updateCompare() {
  const c = S.cmp;
  if (!c || c.busy) return;
  c.busy = true;
  let r;
  try { r = await api('/api/diff', { from: c.from, to: c.to, fork: c.fork }); } finally { c.busy = false; }
  const out = $('cmp-out');
  const sig = JSON.stringify([r.from, r.to, r.changes, r.state_changes]);
  if (S.cmp !== c || !out || sig === c.sig) return;
  c.sig = sig;
  const to = c.fork ? c.to : (c.to ? r.to : '');
  const open = (ch) => { c.open = ch.path; return showDiff(r.from, to, ch, c.fork); };
  clear(out,
    el('h3', {}, el('span', { text: r.from + ' \u2192 ' + r.to + ': ' + r.changes.length + ' changed paths' }),
      (c.to || c.fork) ? null : el('span', { class: 'muted', id: 'cmp-live', text: '  live: follows the files as they change' })),
    r.changes.length ? treeList(pathTree(r.changes), (ch) => open(ch).catch(fail)) : el('p', { class: 'muted', text: 'no differences' }),
    el('div', { id: 'state' }), el('div', { id: 'diff' }));
  renderState($('state'), r.state_changes);
  const still = c.open && r.changes.find((x) => x.path === c.open);
  if (still) open(still).catch(fail);
}

function pollCompare() {
  if (S.view === 'compare' && S.cmp && !S.cmp.to && !S.cmp.fork && !document.hidden) updateCompare().catch(() => {});
}

function historyOf(path) {
  $('path').value = path; S.path = path;
  reload().catch(fail);
}

function compareView() {
  clear($('detail'),
    el('h2', { text: 'Compare' }),
    el('div', { class: 'actions' },
      el('label', { text: 'from ' }, el('input', { id: 'cmp-from', placeholder: 'HEAD~1', value: 'HEAD~1' })),
      el('label', { text: ' to ' }, el('input', { id: 'cmp-to', placeholder: 'working directory', value: 'HEAD' })),
      el('label', { text: ' of fork ' }, el('input', { id: 'cmp-fork', placeholder: 'this workspace', 'aria-label': 'fork directory (empty: this workspace)' })),
      el('button', { type: 'button', id: 'cmp-go', onclick: () => runCompare().catch(fail), text: 'Compare' }),
      el('button', { type: 'button', id: 'cmp-workdir', onclick: () => { $('cmp-to').value = ''; $('cmp-fork').value = ''; runCompare().catch(fail); }, text: 'vs working directory' })),
    el('div', { id: 'cmp-out' }));
}

// ---- usage ------------------------------------------------------------------

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const k of kids) e.append(k);
  return e;
}

async function usageView() {
  const d = $('detail');
  clear(d, el('h2', { text: 'Store usage' }), el('p', { class: 'muted', text: 'measuring\u2026' }));
  const u = await api('/api/du');
  const cps = u.checkpoints;
  const W = 760; const H = 220; const pad = 40;
  const max = Math.max(1, ...cps.map((c) => Math.max(c.new_bytes, c.unique_bytes)));
  const bw = Math.max(1, (W - pad) / Math.max(1, cps.length));
  const plot = svg('svg', { viewBox: '0 0 ' + W + ' ' + (H + 20), class: 'plot', role: 'img', 'aria-label': 'bytes added and unique bytes per checkpoint' });
  plot.append(svg('line', { x1: pad, y1: H, x2: W, y2: H, class: 'axis' }));
  plot.append(svg('text', { x: 2, y: 12, class: 'axis-label' }, bytes(max)));
  plot.append(svg('text', { x: 2, y: H, class: 'axis-label' }, '0'));
  cps.forEach((c, i) => {
    const x = pad + i * bw;
    const h1 = (c.new_bytes / max) * (H - 10); const h2 = (c.unique_bytes / max) * (H - 10);
    const t1 = svg('title', {}); t1.textContent = c.id + ': ' + bytes(c.new_bytes) + ' added, ' + bytes(c.unique_bytes) + ' unique';
    plot.append(svg('rect', { x, y: H - h1, width: Math.max(1, bw * 0.45), height: h1, class: 'bar-new' }, t1));
    plot.append(svg('rect', { x: x + bw * 0.5, y: H - h2, width: Math.max(1, bw * 0.45), height: h2, class: 'bar-unique' }));
  });
  if (cps.length) {
    plot.append(svg('text', { x: pad, y: H + 16, class: 'axis-label' }, cps[0].id));
    plot.append(svg('text', { x: W - 40, y: H + 16, class: 'axis-label' }, cps[cps.length - 1].id));
  }
  clear(d,
    el('h2', { text: 'Store usage' }),
    el('dl', { class: 'meta' },
      el('dt', { text: 'store' }), el('dd', { class: 'mono', text: u.store }),
      el('dt', { text: 'total on disk' }), el('dd', { text: bytes(u.store_bytes) + ' (objects ' + bytes(u.object_bytes) + ', catalog ' + bytes(u.catalog_bytes) + ')' }),
      el('dt', { text: 'gc would free' }), el('dd', { id: 'gc-free', text: bytes(u.unreferenced_bytes) + ' (' + u.unreferenced_objects + ' unreferenced objects)' })),
    el('p', {}, el('span', { class: 'key key-new' }), ' bytes added by each checkpoint  ', el('span', { class: 'key key-unique' }), ' on-disk bytes only that checkpoint holds (deleting it, then collecting garbage, frees them)'),
    plot,
    S.readOnly ? null : el('div', { class: 'actions' }, el('button', { type: 'button', id: 'act-gc', onclick: () => gcFlow().catch(fail), text: 'Collect garbage\u2026' })));
}

// ---- actions (dry run first, then a confirm) -------------------------------

function confirmBox(title, body, okText) {
  const dlg = $('dialog');
  $('dialog-title').textContent = title;
  clear($('dialog-body'), body);
  $('dialog-ok').textContent = okText;
  dlg.showModal();
  return new Promise((resolve) => {
    const done = (v) => () => { dlg.close(); $('dialog-ok').onclick = null; $('dialog-cancel').onclick = null; resolve(v); };
    $('dialog-ok').onclick = done(true);
    $('dialog-cancel').onclick = done(false);
  });
}

function changeList(changes) {
  if (!changes.length) return el('p', { class: 'muted', text: 'nothing would change' });
  return el('ul', { class: 'changes' }, changes.slice(0, 500).map((c) => el('li', { class: c.status },
    el('span', { class: 'st', text: c.status }), ' ', el('span', { class: 'mono', text: c.path }))),
  changes.length > 500 ? el('li', { text: '\u2026 and ' + (changes.length - 500) + ' more' }) : null);
}

// Restores `paths` (all when empty) to `id`: a dry run listed in a
// confirm, then the restore (`undoOf`: this undoes a restore to that
// checkpoint; no dry run). `step`: an after-tool checkpoint being undone,
// `id` its parent (the titles say so).
async function restoreFlow(id, paths, undoOf, step) {
  const body = { id, paths: paths.filter((p) => !p.hex).map((p) => p.text), paths_hex: paths.filter((p) => p.hex).map((p) => p.hex) };
  const what = paths.length ? paths.map((p) => p.text).join(', ') : 'the whole workspace';
  if (!undoOf) {
    const dry = await post('/api/restore', Object.assign({ dry_run: true }, body));
    const title = step ? 'Undo this step, ' + step.id + ' (' + (step.message || 'tool call') + ')?' : 'Restore ' + what + ' to ' + id + '?';
    const intro = step ? 'The whole workspace goes back to ' + id + ', the state just before this tool call' +
      (step.head ? '' : ' (what came after it is undone too)') + '. ' : '';
    const ok = await confirmBox(title,
      el('div', {}, el('p', { text: intro + 'These paths will change (the current state is saved first, so this can be undone):' }), changeList(dry.changes)),
      step ? 'Undo this step' : 'Restore');
    if (!ok) return;
  }
  const r = await post('/api/restore', Object.assign({ dry_run: false }, body));
  const done = undoOf ? 'Undone: ' + what + ' to ' + r.restored
    : step ? 'Undid step ' + step.id + ': the whole workspace restored to ' + r.restored
      : 'Restored ' + what + ' to ' + r.restored;
  restored(done, r, undoOf ? null : paths);
}

// What a restore (or an adopt, which is one) did, on top of the detail
// pane: the undo checkpoint's id and, unless this was an undo (`paths`
// null), an Undo button restoring `paths` (all when empty) to it.
function restored(what, r, paths) {
  const box = el('div', { class: 'done', id: 'restore-done' },
    el('p', { text: what + ' (' + r.changes.length + ' paths changed).' }),
    r.undo ? el('p', {}, 'Undo checkpoint: ', el('code', { id: 'undo-id', text: r.undo }), ' ',
      paths ? el('button', { type: 'button', id: 'act-undo', onclick: () => restoreFlow(r.undo, paths, r.restored).catch(fail), text: 'Undo' }) : null) : null);
  const old = $('restore-done');
  if (old) old.replaceWith(box); else $('detail').prepend(box);
}

async function forkFlow(id) {
  const input = el('input', { id: 'fork-name', value: ($('root').textContent.split('/').pop() || 'ws') + '-' + id });
  const ok = await confirmBox('Fork ' + id + ' into a new workspace',
    el('div', {}, el('p', { text: 'A new directory next to this workspace:' }), input), 'Fork');
  if (!ok) return;
  const r = await post('/api/fork', { id, name: input.value });
  setView('forks');
  note('Forked ' + r.forked + ' into ' + r.to + ' (' + r.files + ' files, ' + bytes(r.bytes) + ')', 'ok');
}

async function deleteFlow(id) {
  const ok = await confirmBox('Delete ' + id + '?', el('p', { text: 'The record is deleted; its data goes at the next gc.' }), 'Delete');
  if (!ok) return;
  await post('/api/delete', { id });
  clear($('detail'), el('p', { class: 'status ok', text: 'Deleted ' + id + '.' }));
}

async function gcFlow() {
  const dry = await post('/api/gc', { dry_run: true });
  const g = dry.gc || dry;
  const drop = dry.selection ? dry.selection.drop.length : 0;
  const ok = await confirmBox('Collect garbage?', el('div', {},
    el('p', { text: 'Would free ' + bytes(g.bytes_freed) + ' (' + g.objects_removed + ' objects, ' + g.trees_removed + ' trees)' + (drop ? ' and drop ' + drop + ' checkpoints by the saved policy' : '') + '.' })), 'Collect');
  if (!ok) return;
  const r = await post('/api/gc', { dry_run: false });
  await usageView();
  note('Freed ' + bytes((r.gc || r).bytes_freed) + '.', 'ok');
}

// ---- forks (the fleet) ------------------------------------------------------

// The Forks view: every fork of this workspace (`ckpt forks`), each with
// Compare (our HEAD against its latest checkpoint, in the Compare view),
// Adopt (dry run, confirm, then the undo checkpoint like a restore) and
// Remove (confirm). The list is asked again on Refresh, when our catalog
// changes, and after a fork, an adopt or a remove made here; a fork's own
// saves do not reach this server's watch, hence Refresh.
function forksView() {
  clear($('detail'),
    el('h2', { text: 'Forks' }),
    el('p', { class: 'muted', text: 'Workspaces forked from this one. Divergence counts from the checkpoint a fork came from to its latest checkpoint: save in the fork to count its work.' }),
    el('div', { class: 'actions' }, el('button', { type: 'button', id: 'forks-refresh', onclick: () => loadForks().catch(fail), text: 'Refresh' })),
    el('div', { id: 'forks-list' }, el('p', { class: 'muted', text: 'listing forks\u2026' })));
  loadForks().catch(fail);
}

// Asks for the list; only the newest answer is drawn.
async function loadForks() {
  const n = S.forksAsked = (S.forksAsked || 0) + 1;
  const r = await api('/api/forks');
  const box = $('forks-list');
  if (n !== S.forksAsked || !box || S.view !== 'forks') return;
  clear(box, r.forks.length ? el('ul', { class: 'forks' }, r.forks.map(forkRow))
    : el('p', { class: 'muted', text: 'No forks. Fork\u2026 on a checkpoint (or `ckpt fork ID DIR`) makes one.' }));
}

function forkRow(f) {
  const d = f.diverged; const l = f.latest;
  const id = l ? l.id : '';
  return el('li', { class: 'fork', 'data-dir': f.dir },
    el('div', { class: 'fork-dir mono', title: f.dir, text: f.dir }),
    el('dl', { class: 'meta' },
      el('dt', { text: 'forked from' }), el('dd', { class: 'fork-origin', text: f.origin }),
      el('dt', { text: 'latest' }), el('dd', { class: 'fork-latest' }, l ? [
        el('span', { class: 'mono', text: l.id }), ' ', el('span', { text: l.message || '(no message)' }), ' ',
        el('span', { class: 'muted', title: exact(l.time_ns), text: ago(l.time_ns) })] : '(none)'),
      el('dt', { text: 'diverged' }), el('dd', { class: 'fork-diverged' },
        el('span', { class: 'add', text: '+' + d.files_added }), el('span', { class: 'mod', text: '~' + d.files_modified }),
        el('span', { class: 'del', text: '\u2212' + d.files_deleted }),
        ' files; ' + bytes(d.bytes_added) + ' added, ' + bytes(d.bytes_modified) + ' modified, ' + bytes(d.bytes_deleted) + ' deleted')),
    el('div', { class: 'actions' },
      el('button', { type: 'button', class: 'fork-compare', onclick: () => forkCompare(f.dir, id).catch(fail), text: 'Compare' }),
      S.readOnly ? null : el('button', { type: 'button', class: 'fork-adopt', onclick: () => adoptFlow(f.dir, id).catch(fail), text: 'Adopt\u2026' }),
      S.readOnly ? null : el('button', { type: 'button', class: 'fork-remove danger', onclick: () => removeForkFlow(f.dir).catch(fail), text: 'Remove\u2026' })));
}

async function forkCompare(dir, id) {
  setView('compare');
  $('cmp-from').value = 'HEAD'; $('cmp-to').value = id; $('cmp-fork').value = dir;
  await runCompare();
}

async function adoptFlow(dir, id) {
  const body = { dir, id: id || null };
  const dry = await post('/api/adopt', Object.assign({ dry_run: true }, body));
  const what = dry.fork + '#' + dry.fork_checkpoint;
  const ok = await confirmBox('Adopt ' + what + '?', el('div', {},
    el('p', { text: 'This workspace becomes exactly that checkpoint of the fork, files and agent state. These paths will change (the current state is saved first, so this can be undone):' }),
    changeList(dry.restore.changes)), 'Adopt');
  if (!ok) return;
  const r = await post('/api/adopt', Object.assign({ dry_run: false }, body));
  restored('Adopted ' + what + ' as ' + r.adopted, r.restore, []);
  await loadForks();
}

async function removeForkFlow(dir) {
  const ok = await confirmBox('Remove the fork ' + dir + '?',
    el('p', { text: 'Its directory and its store are deleted; this cannot be undone. This workspace does not change.' }), 'Remove');
  if (!ok) return;
  const r = await post('/api/fork/remove', { dir });
  await loadForks();
  note('Removed ' + r.removed + (r.note ? ' (' + r.note + ')' : '') + '.', 'ok');
}

// ---- views, keys, live ----------------------------------------------------

function setView(v) {
  if (S.view === v && v !== 'timeline' && v !== 'forks') return;
  S.view = v;
  if (v !== 'compare') S.cmp = null;
  for (const t of ['timeline', 'compare', 'usage', 'forks']) $('nav-' + t).classList.toggle('active', t === v);
  if (v === 'compare') compareView();
  if (v === 'usage') usageView().catch(fail);
  if (v === 'forks') forksView();
}

function debounce(f, ms) { let t; return (...a) => { clearTimeout(t); t = setTimeout(() => f(...a), ms); }; }

function keys(e) {
  if (e.target.closest('input, textarea, dialog')) return;
  if (e.key === 'j') { select(S.sel + 1); e.preventDefault(); }
  else if (e.key === 'k') { select(Math.max(0, S.sel - 1)); e.preventDefault(); }
  else if (e.key === 'Enter') { openSelected(); e.preventDefault(); }
  else if (e.key === '/') { $('search').focus(); e.preventDefault(); }
}

function live() {
  const es = new EventSource('/api/events?token=' + TOKEN);
  const dot = $('live');
  es.addEventListener('hello', () => { dot.classList.add('on'); dot.title = 'live updates: connected'; });
  es.addEventListener('changed', () => {
    refresh().catch(fail); pollCompare();
    if (S.view === 'forks') loadForks().catch(() => {});
  });
  es.onerror = () => { dot.classList.remove('on'); dot.title = 'live updates: reconnecting'; };
}

async function main() {
  const info = await api('/api/info');
  S.readOnly = info.read_only;
  $('root').textContent = info.root;
  $('root').title = info.root;
  $('mode').textContent = info.read_only ? 'read-only' : '';
  document.body.classList.toggle('read-only', info.read_only);
  $('nav-timeline').addEventListener('click', () => setView('timeline'));
  $('nav-compare').addEventListener('click', () => setView('compare'));
  $('nav-usage').addEventListener('click', () => setView('usage'));
  $('nav-forks').addEventListener('click', () => setView('forks'));
  $('more').addEventListener('click', () => older().catch(fail));
  $('search').addEventListener('input', debounce((e) => { S.search = e.target.value.trim(); reload().catch(fail); }, 150));
  $('path').addEventListener('input', debounce((e) => { S.path = e.target.value.trim(); reload().catch(fail); }, 300));
  $('session').addEventListener('input', debounce((e) => { S.session = e.target.value.trim(); reload().catch(fail); }, 300));
  document.addEventListener('keydown', keys);
  new IntersectionObserver((es) => { if (es.some((x) => x.isIntersecting)) older().catch(fail); }).observe($('more'));
  setInterval(() => { for (const t of document.querySelectorAll('.time[data-ns]')) t.textContent = ago(+t.dataset.ns); }, 30000);
  live();
  setInterval(pollCompare, POLL_MS);
  await reload();
  // For the benchmark (bench/ui_bench.py): navigation start → first page shown.
  document.body.dataset.readyMs = String(performance.now());
  document.body.setAttribute('data-ready', '1');
}

main().catch(fail);
