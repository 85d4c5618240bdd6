// Loom inspector: plain JavaScript, no build step, no dependencies.
// Everything shown is read from the JSON API, which folds the event log;
// the page never writes. This file is the execution view's spine: routing
// (#/x/<id> and #/x/<id>@<seq>), the timeline, the slider and the live
// streams; the panes it draws are in panes.js, the list in list.js.
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
  open: new Set(),    // keys of the JSON blocks the reader opened (panes.js)
  runs: new Map(),    // each step's open run in the timeline: its first STEP_STARTED
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

// el builds an element: class, text, and attributes (data-*, aria-*, role,
// datetime, for) as attributes, any other key as a property.
function el(tag, attrs, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === 'class') n.className = v;
    else if (k === 'text') n.textContent = v;
    else if (k.startsWith('data-') || k.startsWith('aria-') || k === 'role' || k === 'datetime' || k === 'for') n.setAttribute(k, v);
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

// execRoute is the page's address of an execution, at a sequence when seq
// is given.
function execRoute(id, seq) {
  return '#/x/' + encodeURIComponent(id) + (seq !== undefined && seq !== null ? '@' + seq : '');
}

// execLink is a link that opens execution id (at seq, when given).
function execLink(id, label, seq) {
  return el('a', { href: execRoute(id, seq), 'data-id': id, 'data-seq': seq !== undefined ? String(seq) : undefined, text: label || id });
}

function lastLink(chain) {
  return Array.isArray(chain) && chain.length ? chain[chain.length - 1] : null;
}

// ---- one execution --------------------------------------------------------

// select opens execution id: its log, then the slider at the sequence the
// address asked for (at, the text after "@"), or at the end. A sequence
// the log does not hold is said in the page, and the view opens at the
// end.
async function select(id, at) {
  closeStreams();
  setLive(false);
  view.selected = id;
  view.latest = null;
  view.events = [];
  view.truncated = false;
  view.open.clear();
  showList();
  $('#empty').hidden = true;
  $('#detail').hidden = false;
  $('#exec-id').textContent = id;
  $('#download-log').href = 'api/log?' + new URLSearchParams({ id }).toString();
  $('#download-log').setAttribute('download', id.replace(/[^A-Za-z0-9._~+-]/g, '_') + '.jsonl');
  $('#timeline').replaceChildren();
  $('#gantt').replaceChildren();
  renderPending(null);
  seqNote('');
  let from = 0;
  for (let i = 0; i < MAX_EVENT_PAGES; i++) {
    const page = await api('events', { id, from, limit: 500 });
    if (view.selected !== id) return;
    view.events.push(...page.events);
    if (page.next === undefined) break;
    from = page.next;
    if (i === MAX_EVENT_PAGES - 1) view.truncated = true;
  }
  if (!view.events.length) throw new Error('no such execution in this store: ' + id);
  const head = view.events[0];
  $('#exec-flow').textContent = head ? head.workflowId : '';
  renderTimeline();
  renderGantt();
  const want = requested(id, at);
  seqNote(want.note || '');
  if (want.seq === lastSeq()) moveTo(want.seq, true);
  else moveTo(want.seq, false);
  follow(id);
  watchState(id);
}

// requested reads the sequence an address asks for against the log
// loaded: {seq} to show, and a note when it had to be another.
function requested(id, at) {
  const last = lastSeq();
  if (at === undefined || at === '') return { seq: last };
  if (!/^\d+$/.test(at)) return { seq: last, note: '"' + at + '" is not a sequence number: showing the last event, #' + last + '.' };
  const n = Number(at);
  const first = view.events[0].sequence;
  if (n > last && view.truncated) {
    return { seq: last, note: 'only the first ' + view.events.length + ' events of ' + id + ' are loaded, up to #' + last + ': showing #' + last + '.' };
  }
  if (n > last) return { seq: last, note: id + ' has no event #' + n + ': its log ends at #' + last + '. Showing #' + last + '.' };
  if (n < first) return { seq: first, note: id + ' has no event #' + n + ' here: its log starts at #' + first + '. Showing #' + first + '.' };
  return { seq: eventAt(n) ? n : last, note: eventAt(n) ? '' : 'event #' + n + ' was compacted away: showing #' + last + '.' };
}

// seqNote says (or clears) why the slider is not where the address asked.
function seqNote(text) {
  const n = $('#seq-note');
  n.textContent = text;
  n.hidden = !text;
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

// eventAt is the loaded event at seq, if any.
function eventAt(seq) {
  const evs = view.events;
  if (!evs.length) return undefined;
  const guess = evs[seq - evs[0].sequence];
  if (guess && guess.sequence === seq) return guess;
  return evs.find((e) => e.sequence === seq); // a compacted log has a hole
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
    scheduleGantt();
    if (wasAtEnd) moveTo(e.sequence, true);
    else markTimeline();
    if (view.latest) renderPending(view.latest); // it reads the log the state points into
    if (!view.watchLive) refreshListing(id); // else the watch brings the latest state
  });
}

let ganttTimer = 0;
// scheduleGantt redraws the chart once a burst of events has arrived.
function scheduleGantt() {
  clearTimeout(ganttTimer);
  ganttTimer = setTimeout(renderGantt, 50);
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
// the list, the header and the pending panel, unless the page knows a
// later one.
function showLatest(id, state) {
  if (id !== view.selected || (view.latest && view.latest.sequence > state.sequence)) return;
  view.latest = state;
  view.ahead.set(id, { status: state.status, sequence: state.sequence, length: state.sequence + 1, updatedAt: state.updatedAt,
    suspendedOn: suspendedOn(state) });
  showList();
  renderPending(state);
}

// renderHeader shows the execution's status and length and every
// execution it links to: the one it was forked from, its parent, its
// children, its listed forks and its successor.
function renderHeader(latest) {
  $('#exec-header').dataset.execution = view.selected;
  statusBadge($('#exec-status'), latest.status);
  $('#exec-length').textContent = (latest.sequence + 1) + ' events';
  const v = latest.variables || {};
  const parts = [];
  const parent = lastLink(v._forkChain);
  if (parent) parts.push([...forkLine(parent)]);
  if (v._parent && v._parent.executionId) parts.push(['child of ', execLink(v._parent.executionId), ' (as ' + v._parent.name + ')']);
  const kids = spawnedChildren(latest.frames);
  if (kids.length) parts.push(['children: ', ...kids.flatMap((f, i) => [i ? ', ' : '', execLink(f.output.childId)])]);
  const forks = view.executions.filter((x) => {
    const p = lastLink(x.forkChain);
    return p && p.executionId === view.selected;
  });
  if (forks.length) parts.push(['forks: ', ...forks.flatMap((c, i) => [i ? ', ' : '', execLink(c.executionId)])]);
  if (v._continuedTo) parts.push(['continued as ', execLink(v._continuedTo)]);
  replaceIfChanged($('#exec-lineage'), parts.flatMap((p, i) => (i ? [' · ', ...p] : p)));
}

// replaceIfChanged puts nodes (of links and text only) in box unless it
// already shows the same: the list redraws the header about once a second
// while the store changes, and a redraw would take the keyboard's focus.
function replaceIfChanged(box, nodes) {
  const next = el('div', {}, ...nodes);
  if (next.innerHTML !== box.innerHTML) box.replaceChildren(...next.childNodes);
}

// ---- the timeline and the slider -----------------------------------------

function kindOf(type, payload) {
  if (type === 'EXECUTION_SUSPENDED' && payload && payload.on === '__loom_diverged__') return 'diverged';
  if (type === 'EXECUTION_SUSPENDED') return 'suspend';
  if (type === 'EXECUTION_RESUMED' || type === 'TIMER_FIRED') return 'resume';
  if (type === 'APPROVAL_GRANTED') return 'approval';
  if (type === '__loom_fork__') return 'fork';
  if (type === 'EXECUTION_FAILED' || type === 'STEP_FAILED' || type === 'EXECUTION_CANCELLED') return 'fail';
  if (type === 'STEP_RETRYING') return 'retry';
  if (type === 'EXECUTION_COMPLETED' || type === 'STEP_COMPLETED') return 'done';
  return 'other';
}

// describe is one line about an event: text, and links to the executions
// it names.
function describe(e) {
  const p = e.payload || {};
  switch (e.eventType) {
    case 'STEP_STARTED': case 'STEP_CANCELLED': return [p.stepId];
    case 'STEP_COMPLETED':
      if (typeof p.stepId === 'string' && p.stepId.startsWith('__loom_spawn:') && p.output && p.output.childId) {
        return [p.stepId + ' → child ', execLink(p.output.childId)];
      }
      return [p.stepId + ' → ' + json(p.output, 80)];
    case 'STEP_RETRYING': return [describeRetry(p)];
    case 'STEP_FAILED':
      if (!p.channel) return [p.stepId + ': ' + errorText(p.error)];
      return [p.stepId + ' on channel ' + p.channel + (errorFields(p.payload) ? ': ' + errorText(p.payload) : ' ' + json(p.payload, 60))];
    case 'DECISION_RECORDED': return [decisionNode(p.decisionId, p.choice, 80)];
    case 'EXECUTION_SUSPENDED':
      if (p.on === '__loom_child__' && p.correlationKey) return ['parked on ' + p.on + ': awaiting child ', execLink(p.correlationKey)];
      if (p.on === '__loom_diverged__') return ['replay diverged from the log, parked on ' + p.on + (p.reason ? ': ' + p.reason : '')];
      return ['parked on ' + p.on];
    case 'EXECUTION_RESUMED':
      if (p.eventType === '__loom_child__' && p.payload && p.payload.childId) {
        return ['child ', execLink(p.payload.childId), ' ended ' + (p.payload.status || '')];
      }
      return [(p.eventType || '') + ' ' + json(p.payload, 80)];
    case 'APPROVAL_GRANTED': return [json(p.principal, 60) + ' for ' + p.gate];
    case '__loom_fork__': return ['fork of ', execLink(p.parent), ' at ', execLink(p.parent, '#' + p.at, p.at)];
    case 'EXECUTION_STARTED':
      if (p.parent && p.parent.executionId) return ['input ' + json(p.input, 60) + ', child of ', execLink(p.parent.executionId)];
      return ['input ' + json(p.input, 100)];
    case 'EXECUTION_COMPLETED': return ['output ' + json(p.output, 100)];
    case 'EXECUTION_FAILED': return ['error: ' + errorText(p.error)];
    case 'EXECUTION_CANCELLED': return [typeof p.reason === 'string' && p.reason ? 'reason: ' + p.reason : 'cancelled'];
    case 'EXECUTION_CONTINUED': return ['continued as ', execLink(p.nextExecutionId)];
    default: return [json(e.payload, 100)];
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

const SETTLES = ['STEP_COMPLETED', 'STEP_FAILED', 'STEP_CANCELLED'];

// rowNote is what a row adds to its line, from recorded times: how long a
// step took (from start, the STEP_STARTED that opened its run), when a
// retry's next attempt was due.
function rowNote(e, start) {
  const p = e.payload || {};
  if (e.eventType === 'STEP_RETRYING') {
    const due = retryDue(e);
    const failed = typeof p.attempt === 'number' ? 'attempt ' + (p.attempt - 1) + ' failed' : 'an attempt failed';
    const note = el('span', { class: 'note' }, failed + ': ', el('span', { class: 'error-text', text: errorText(p.error) }));
    if (due !== undefined) note.append('; next attempt after ' + took(p.delayMs) + ', due ', timeNode(due));
    return note;
  }
  if (start) return el('span', { class: 'note took', text: 'took ' + took(e.timestamp - start.timestamp) + ' (from #' + start.sequence + ')' });
  return null;
}

// trackStep follows each step's open run (view.runs: its first
// STEP_STARTED) through the log, one event at a time and in order, and
// returns the start of the run e settles, if e settles one.
function trackStep(e) {
  const p = e.payload || {};
  if (typeof p.stepId !== 'string') return null;
  if (e.eventType === 'STEP_STARTED') {
    if (!view.runs.has(p.stepId)) view.runs.set(p.stepId, e);
    return null;
  }
  if (!SETTLES.includes(e.eventType)) return null;
  const start = view.runs.get(p.stepId) || null;
  view.runs.delete(p.stepId);
  return start;
}

function timelineRow(e, fresh) {
  const label = 'event #' + e.sequence;
  const li = el('li', { class: 'k-' + kindOf(e.eventType, e.payload) + (fresh ? ' fresh' : ''), 'data-seq': e.sequence, 'data-type': e.eventType },
    el('button', { type: 'button', class: 'seq', text: '#' + e.sequence, 'aria-label': 'show the state after ' + label + ', ' + e.eventType }),
    el('span', { class: 'type', text: e.eventType }),
    el('span', { class: 'detail', title: time(e.timestamp) }, ...describe(e)),
    rowNote(e, trackStep(e)),
    e.payload !== undefined && e.payload !== null ? payloadBlock(e, label) : null);
  li.addEventListener('click', (ev) => {
    if (ev.target.closest('details, a')) return; // its own control
    jumpTo(e.sequence);
  });
  return li;
}

// payloadBlock is a row's payload, folded away; its summary says whose.
function payloadBlock(e, label) {
  const block = jsonBlock(['payload'], e.payload, 'the payload of ' + label, 'event:' + e.sequence);
  block.querySelector('summary').setAttribute('aria-label', 'payload of ' + label);
  return block;
}

function renderTimeline() {
  const ol = $('#timeline');
  view.runs = new Map();
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
    const current = s === view.seq;
    li.classList.toggle('current', current);
    if (current) li.setAttribute('aria-current', 'step');
    else li.removeAttribute('aria-current');
  }
  $('#follow-note').textContent = view.following ? 'following the log' : 'time-travelling: move to the end to follow';
  const e = eventAt(view.seq);
  $('#seq').setAttribute('aria-valuetext', '#' + view.seq + (e ? ', ' + e.eventType : ''));
  moveGanttCursor();
}

// revealCurrent scrolls the timeline (and nothing else: the page stays
// where the reader left it) so the current event's row is in view.
function revealCurrent() {
  const ol = $('#timeline');
  const row = ol.querySelector('li.current');
  if (!row) return;
  const top = row.offsetTop;
  const bottom = top + row.offsetHeight;
  if (top < ol.scrollTop) ol.scrollTop = top;
  else if (bottom > ol.scrollTop + ol.clientHeight) ol.scrollTop = bottom - ol.clientHeight;
}

// moveTo puts the slider at seq; byLog says the log moved it (the page
// opened, or an event arrived while it sat at the end), not the reader.
function moveTo(seq, byLog) {
  const slider = $('#seq');
  slider.value = String(seq);
  view.seq = Number(slider.value);
  view.following = view.seq === lastSeq();
  $('#seq-label').textContent = '#' + view.seq;
  markTimeline();
  revealCurrent();
  if (!byLog || /@/.test(location.hash)) writeAddress();
  // Moved by the log with the watch live: the watch sends the state; the
  // pane is drawn again for the events it reads (gates, fork markers).
  if (byLog && view.watchLive && view.latest) showState(view.selected, view.latest);
  else showAt(view.seq);
}

// jumpTo is the reader moving the slider to seq (a row, a bar, a link).
function jumpTo(seq) {
  seqNote('');
  moveTo(seq, false);
}

// writeAddress puts the slider's sequence in the address, without a new
// history entry: a reload or a shared link opens the same view.
function writeAddress() {
  if (view.selected === null) return;
  const want = execRoute(view.selected, view.seq);
  if (location.hash !== want) history.replaceState(null, '', want);
}

let slideTimer = 0;
function onSlide() {
  const slider = $('#seq');
  view.seq = Number(slider.value);
  view.following = view.seq === lastSeq();
  $('#seq-label').textContent = '#' + view.seq;
  seqNote('');
  markTimeline();
  revealCurrent();
  writeAddress();
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

// route opens what the address names: #/x/<id>, or #/x/<id>@<seq> for
// the execution with its slider at seq (the selected one just moves its
// slider).
function route() {
  const m = location.hash.match(/^#\/x\/([^@]+)(?:@(.*))?$/);
  if (!m) return;
  let id;
  try {
    id = decodeURIComponent(m[1]);
  } catch (_) {
    showError(new Error('the address names no execution: ' + location.hash));
    return;
  }
  const at = m[2] === undefined ? undefined : m[2];
  if (id === view.selected && view.events.length && at !== undefined) {
    const want = requested(id, at);
    seqNote(want.note || '');
    moveTo(want.seq, false);
    return;
  }
  select(id, at).catch((err) => {
    $('#detail').hidden = true;
    showError(err);
  });
}

function showError(err) {
  $('#empty').hidden = false;
  $('#empty').replaceChildren(el('p', { class: 'typed', role: 'alert', text: String(err.message || err) }));
}

window.addEventListener('hashchange', route);
$('#seq').addEventListener('input', onSlide);
$('#more-executions').addEventListener('click', () => moreExecutions().catch(showError));
Promise.all([loadExecutions(), loadRefs()]).then(route).catch(showError);
