// Loom inspector: plain JavaScript, no build step, no dependencies.
// Everything shown is read from the JSON API, which folds the event log;
// the page never writes.
'use strict';

const $ = (sel) => document.querySelector(sel);
const MAX_EVENT_PAGES = 40; // 40 pages of 500: the timeline holds 20,000 events at most

const view = {
  executions: [],     // the list as shown
  next: '',           // cursor of the next listing page
  selected: null,     // execution id
  events: [],         // its log, in order
  seq: -1,            // the slider's sequence
  following: true,    // the slider sits at the end and moves with the log
  live: null,         // EventSource of the selected execution's log (api/live)
  watch: null,        // EventSource of its folded state (api/watch)
  watchLive: false,   // the watch is open: at the end, the state pane shows what it sends
  latest: null,       // the selected execution's latest state the page knows
  ahead: new Map(),   // listing fields of states newer than the list's last frame, by execution
  stateRequest: 0,    // drops answers to older state requests
  truncated: false,
};

// ---- the JSON API ---------------------------------------------------------

async function api(path, params) {
  const q = new URLSearchParams(params || {});
  const resp = await fetch('api/' + path + '?' + q.toString(), { headers: { Accept: 'application/json' } });
  const body = await resp.json().catch(() => ({ error: resp.statusText }));
  if (!resp.ok) throw new Error(body.error || resp.statusText);
  return body;
}

// ---- small rendering helpers ---------------------------------------------

function el(tag, attrs, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === 'class') n.className = v;
    else if (k === 'text') n.textContent = v;
    else if (k.startsWith('data-')) n.setAttribute(k, v);
    else n[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return n;
}

function json(v, max) {
  if (v === undefined) return '';
  let s = JSON.stringify(v);
  if (max && s.length > max) s = s.slice(0, max - 1) + '…';
  return s;
}

function time(ms) {
  if (!ms) return '';
  return new Date(ms).toISOString().replace('T', ' ').replace('Z', ' UTC');
}

function statusBadge(node, status) {
  node.textContent = status || '';
  node.className = 'status s-' + (status || 'none');
}

function none(text) { return el('p', { class: 'none', text }); }

function execLink(id, label) {
  return el('a', { href: '#/x/' + encodeURIComponent(id), 'data-id': id, text: label || id });
}

function lastLink(chain) {
  return Array.isArray(chain) && chain.length ? chain[chain.length - 1] : null;
}

// ---- one execution --------------------------------------------------------

async function select(id) {
  closeStreams();
  setLive(false);
  view.selected = id;
  view.latest = null;
  view.events = [];
  view.truncated = false;
  showList();
  $('#empty').hidden = true;
  $('#detail').hidden = false;
  $('#exec-id').textContent = id;
  $('#timeline').replaceChildren();
  let from = 0;
  for (let i = 0; i < MAX_EVENT_PAGES; i++) {
    const page = await api('events', { id, from, limit: 500 });
    if (view.selected !== id) return;
    view.events.push(...page.events);
    if (page.next === undefined) break;
    from = page.next;
    if (i === MAX_EVENT_PAGES - 1) view.truncated = true;
  }
  const head = view.events[0];
  $('#exec-flow').textContent = head ? head.workflowId : '';
  renderTimeline();
  moveTo(lastSeq(), true);
  follow(id);
  watchState(id);
}

// closeStreams ends the selected execution's streams: its log and its state.
function closeStreams() {
  if (view.live) { view.live.close(); view.live = null; }
  if (view.watch) { view.watch.close(); view.watch = null; }
  setStateLive(false);
  delete $('#state-pane').dataset.watched;
}

function lastSeq() {
  return view.events.length ? view.events[view.events.length - 1].sequence : 0;
}

// follow opens the live stream from the end of what is loaded.
function follow(id) {
  if (view.truncated || typeof EventSource === 'undefined') return;
  const src = new EventSource('api/live?' + new URLSearchParams({ id, from: lastSeq() + 1 }).toString());
  view.live = src;
  src.onopen = () => setLive(true);
  src.onerror = () => setLive(false);
  src.addEventListener('envelope', (msg) => {
    if (view.selected !== id) return;
    const e = JSON.parse(msg.data);
    if (view.events.length && e.sequence <= lastSeq()) return; // a replay after a reconnect
    const wasAtEnd = view.following;
    view.events.push(e);
    $('#timeline').append(timelineRow(e, true));
    updateScrubber();
    if (wasAtEnd) moveTo(e.sequence, true);
    else markTimeline();
    if (!view.watchLive) refreshListing(id); // else the watch brings the latest state
  });
}

// watchState follows the selected execution's folded state (api/watch):
// each frame is its latest state, shown in the list and the header and,
// while the slider sits at the end, in the state pane. Without it (no
// EventSource, or a store that cannot follow: 501) the pane fetches the
// state as the log grows, marked "not live".
function watchState(id) {
  if (typeof EventSource === 'undefined') { setStateLive(false, 'not live'); return; }
  const src = new EventSource('api/watch?' + new URLSearchParams({ id }).toString());
  view.watch = src;
  src.onopen = () => { if (view.watch === src) setStateLive(true); };
  src.addEventListener('state', (msg) => {
    if (view.watch !== src) return;
    const state = JSON.parse(msg.data);
    setStateLive(true);
    $('#state-pane').dataset.watched = String(state.sequence); // the last state the watch sent, for tests
    showLatest(id, state);
    if (view.following) showState(id, state);
  });
  src.onerror = () => {
    if (view.watch !== src) return;
    if (src.readyState !== EventSource.CLOSED) { setStateLive(false, 'not live: reconnecting…'); return; }
    src.close(); // refused: an error status, not a stream
    view.watch = null;
    setStateLive(false, 'not live');
  };
}

function setStateLive(on, note) {
  view.watchLive = on;
  $('#state-pane').dataset.live = on ? 'on' : 'off';
  const n = $('#state-note');
  n.hidden = on || !note;
  if (note) n.textContent = note;
}

function setLive(on) {
  const n = $('#live');
  n.className = 'live ' + (on ? 'on' : 'off');
}

// refreshListing updates the selected execution's status in the list and
// the header, debounced while a burst of events arrives.
let listingTimer = 0;
function refreshListing(id) {
  clearTimeout(listingTimer);
  listingTimer = setTimeout(async () => {
    const { state } = await api('state', { id });
    showLatest(id, state);
  }, 150);
}

// showLatest records the selected execution's latest state and puts it in
// the list and the header, unless the page knows a later one.
function showLatest(id, state) {
  if (id !== view.selected || (view.latest && view.latest.sequence > state.sequence)) return;
  view.latest = state;
  view.ahead.set(id, { status: state.status, sequence: state.sequence, length: state.sequence + 1, updatedAt: state.updatedAt,
    suspendedOn: suspendedOn(state) });
  showList();
}

function renderHeader(latest) {
  $('#exec-header').dataset.execution = view.selected;
  statusBadge($('#exec-status'), latest.status);
  $('#exec-length').textContent = (latest.sequence + 1) + ' events';
  const lineage = $('#exec-lineage');
  lineage.replaceChildren();
  const parent = lastLink(latest.variables._forkChain);
  if (parent) {
    lineage.append('forked from ', execLink(parent.executionId), ' at #' + parent.sequence +
      (parent.simulate ? ' (simulation)' : ''));
  }
  const children = view.executions.filter((x) => {
    const p = lastLink(x.forkChain);
    return p && p.executionId === view.selected;
  });
  if (children.length) {
    lineage.append(parent ? ' · ' : '', 'forks: ');
    children.forEach((c, i) => lineage.append(i ? ', ' : '', execLink(c.executionId)));
  }
}

// ---- the timeline and the slider -----------------------------------------

function kindOf(type) {
  if (type === 'EXECUTION_SUSPENDED') return 'suspend';
  if (type === 'EXECUTION_RESUMED' || type === 'TIMER_FIRED') return 'resume';
  if (type === 'APPROVAL_GRANTED') return 'approval';
  if (type === '__loom_fork__') return 'fork';
  if (type === 'EXECUTION_FAILED' || type === 'STEP_FAILED' || type === 'EXECUTION_CANCELLED') return 'fail';
  if (type === 'STEP_RETRYING') return 'retry';
  if (type === 'EXECUTION_COMPLETED' || type === 'STEP_COMPLETED') return 'done';
  return 'other';
}

function describe(e) {
  const p = e.payload || {};
  switch (e.eventType) {
    case 'STEP_STARTED': case 'STEP_COMPLETED': case 'STEP_CANCELLED':
      return p.stepId + (e.eventType === 'STEP_COMPLETED' ? ' → ' + json(p.output, 80) : '');
    case 'STEP_RETRYING': return describeRetry(p);
    case 'STEP_FAILED':
      return p.stepId + (p.channel ? ' on channel ' + p.channel + ' ' + json(p.payload, 60) : ' ' + json(p.error, 60));
    case 'DECISION_RECORDED': return p.decisionId + ' = ' + json(p.choice, 80);
    case 'EXECUTION_SUSPENDED': return 'parked on ' + p.on;
    case 'EXECUTION_RESUMED': return (p.eventType || '') + ' ' + json(p.payload, 80);
    case 'APPROVAL_GRANTED': return json(p.principal, 60) + ' for ' + p.gate;
    case '__loom_fork__': return 'fork of ' + p.parent + ' at #' + p.at;
    case 'EXECUTION_STARTED': return 'input ' + json(p.input, 100);
    case 'EXECUTION_COMPLETED': return 'output ' + json(p.output, 100);
    default: return json(e.payload, 100);
  }
}

// describeRetry says what a STEP_RETRYING recorded: the attempt about to
// run, after what delay, and the error of the attempt that failed.
function describeRetry(p) {
  let s = p.stepId + ': ' + (p.attempt !== undefined ? 'attempt ' + p.attempt : 'another attempt');
  if (typeof p.delayMs === 'number') s += ' in ' + (p.delayMs >= 1000 ? (p.delayMs / 1000) + 's' : p.delayMs + 'ms');
  const msg = p.error && typeof p.error === 'object' && p.error.message !== undefined ? p.error.message : p.error;
  if (msg !== undefined) s += ', after: ' + json(msg, 80);
  return s;
}

function timelineRow(e, fresh) {
  const li = el('li', { class: 'k-' + kindOf(e.eventType) + (fresh ? ' fresh' : ''), 'data-seq': e.sequence, 'data-type': e.eventType },
    el('span', { class: 'seq', text: '#' + e.sequence }),
    el('span', { class: 'type', text: e.eventType }),
    el('span', { class: 'detail', text: describe(e), title: time(e.timestamp) }));
  li.addEventListener('click', () => moveTo(e.sequence, false));
  return li;
}

function renderTimeline() {
  const ol = $('#timeline');
  ol.replaceChildren(...view.events.map((e) => timelineRow(e, false)));
  updateScrubber();
}

function updateScrubber() {
  const slider = $('#seq');
  slider.min = view.events.length ? view.events[0].sequence : 0;
  slider.max = lastSeq();
  $('#timeline-count').textContent = view.events.length + ' events' + (view.truncated ? ' (first pages only)' : '');
}

function markTimeline() {
  for (const li of $('#timeline').children) {
    const s = Number(li.dataset.seq);
    li.classList.toggle('future', s > view.seq);
    li.classList.toggle('current', s === view.seq);
  }
  $('#follow-note').textContent = view.following ? 'following the log' : 'time-travelling: move to the end to follow';
}

function moveTo(seq, byLog) {
  const slider = $('#seq');
  slider.value = String(seq);
  view.seq = Number(slider.value);
  view.following = view.seq === lastSeq();
  $('#seq-label').textContent = '#' + view.seq;
  markTimeline();
  const row = $('#timeline').querySelector('li.current');
  if (row && !byLog) row.scrollIntoView({ block: 'nearest' });
  // Moved by the log with the watch live: the watch sends the state; the
  // pane is drawn again for the events it reads (gates, fork markers).
  if (byLog && view.watchLive && view.latest) showState(view.selected, view.latest);
  else showAt(view.seq);
}

let slideTimer = 0;
function onSlide() {
  const slider = $('#seq');
  view.seq = Number(slider.value);
  view.following = view.seq === lastSeq();
  $('#seq-label').textContent = '#' + view.seq;
  markTimeline();
  clearTimeout(slideTimer);
  slideTimer = setTimeout(() => showAt(view.seq), 40);
}

// ---- the state pane (rendered by panes.js) ------------------------------

// showAt shows the state at seq: at the end, with the watch live, the
// latest state it sent (it replaces the pane until the slider moves back);
// else the state fetched at seq.
function showAt(seq) {
  if (view.following && view.watchLive && view.latest && view.latest.sequence >= seq) showState(view.selected, view.latest);
  else loadState(seq);
}

// showState puts a state the page holds in the pane, dropping the answers
// of fetches still on their way.
function showState(id, state) {
  ++view.stateRequest;
  paintState(id, state);
}

async function loadState(seq) {
  const id = view.selected;
  const ticket = ++view.stateRequest;
  const { state } = await api('state', { id, at: seq });
  if (ticket !== view.stateRequest || id !== view.selected) return;
  paintState(id, state);
  if (seq === lastSeq()) showLatest(id, state);
}

function paintState(id, state) {
  renderState(state);
  // What the pane shows, for scripts and tests that read the page.
  $('#state-pane').dataset.execution = id;
  $('#state-pane').dataset.seq = String(state.sequence);
}

// ---- wiring ---------------------------------------------------------------

function route() {
  const m = location.hash.match(/^#\/x\/(.+)$/);
  if (m) select(decodeURIComponent(m[1])).catch(showError);
}

function showError(err) {
  $('#empty').hidden = false;
  $('#empty').replaceChildren(el('p', { class: 'typed', text: String(err.message || err) }));
}

window.addEventListener('hashchange', route);
$('#seq').addEventListener('input', onSlide);
$('#more-executions').addEventListener('click', () => moreExecutions().catch(showError));
Promise.all([loadExecutions(), loadRefs()]).then(route).catch(showError);
