// Loom inspector: the execution list and the branch refs (the sidebar).
// Plain JavaScript sharing app.js's globals; loaded before it.
'use strict';

const LIST_PAGE = 50;       // executions per page of the list
const MAX_LIVE_LIST = 500;  // the API's largest page: the live list covers the first 500 at most

// list is where the execution list comes from: one live stream
// (api/executions/live) over its first list.limit executions, then pages
// fetched after them. When the stream cannot be had (no EventSource, or
// the server refuses it) every page is fetched, as of its fetch.
const list = {
  limit: LIST_PAGE,   // how many executions the live stream covers
  source: null,       // its EventSource; null when the list is fetched
  head: [],           // the executions of its last frame
  headNext: '',       // the cursor after them
  tail: [],           // pages fetched after the head
  tailNext: null,     // the cursor after the tail; null before a page is fetched
  order: '',          // 'recent' (the store's catalog, newest first) or 'id'
  counts: null,       // executions by status of the filters (prefix, flow, tenant); recent order only
};

// STATUSES are the statuses a list filters by, in the fold's order.
const STATUSES = ['pending', 'running', 'suspended', 'completed', 'failed', 'cancelled', 'continued'];

// filters is the list's query: an id prefix (q), a status, a flow and a
// tenant, each '' for any. They live in the page's query string, so a
// link holds them, and the server applies them.
const filters = { q: '', status: '', flow: '', tenant: '' };

function readFilters() {
  const p = new URLSearchParams(location.search);
  for (const k of Object.keys(filters)) filters[k] = p.get(k) || '';
}

// ---- the filter bar -------------------------------------------------------

// ensureControls builds the search box, the filters and the counts once,
// from the query string.
function ensureControls() {
  const box = $('#list-controls');
  if (box.dataset.built) return;
  box.dataset.built = 'yes';
  readFilters();
  const field = (id, label, input) => el('div', { class: 'field' }, el('label', { htmlFor: id, text: label }), input);
  const q = el('input', { id: 'f-q', type: 'search', placeholder: 'id prefix', autocomplete: 'off', value: filters.q });
  const status = el('select', { id: 'f-status' }, el('option', { value: '', text: 'any' }),
    ...STATUSES.map((s) => el('option', { value: s, text: s })));
  status.value = filters.status;
  const flow = el('input', { id: 'f-flow', type: 'text', placeholder: 'any', autocomplete: 'off', value: filters.flow });
  const tenant = el('input', { id: 'f-tenant', type: 'text', placeholder: 'any', autocomplete: 'off', value: filters.tenant });
  const form = el('form', { id: 'list-filters', role: 'search', 'aria-label': 'filter executions' },
    field('f-q', 'Search by id', q), field('f-status', 'Status', status),
    field('f-flow', 'Flow', flow), field('f-tenant', 'Tenant', tenant));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); applyFilters(); });
  let typing = 0;
  for (const input of [q, flow, tenant]) {
    input.addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(applyFilters, 250); });
  }
  status.addEventListener('change', applyFilters);
  box.append(form,
    el('div', { id: 'list-counts', role: 'group', 'aria-label': 'executions by status' }),
    el('p', { id: 'list-order', class: 'muted' }));
  setInterval(renderExecutions, 30000); // relative times move on
}

// applyFilters takes the filter bar's values as the list's query: the
// query string follows (a reload or a link keeps them) and the list starts
// again from its first page.
function applyFilters() {
  const next = {
    q: $('#f-q').value.trim(), status: $('#f-status').value,
    flow: $('#f-flow').value.trim(), tenant: $('#f-tenant').value.trim(),
  };
  if (Object.keys(filters).every((k) => filters[k] === next[k])) return;
  Object.assign(filters, next);
  const p = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(filters)) {
    if (v) p.set(k, v); else p.delete(k);
  }
  const qs = p.toString();
  history.replaceState(null, '', location.pathname + (qs ? '?' + qs : '') + location.hash);
  Object.assign(list, { limit: LIST_PAGE, head: [], headNext: '', tail: [], tailNext: null });
  view.next = '';
  loadExecutions().catch(showError);
}

// renderCounts shows the counts by status as buttons that filter by it
// (pressed: the status filtered by), and the list's order.
function renderCounts() {
  const box = $('#list-counts');
  if (!box) return;
  box.replaceChildren();
  if (list.counts) {
    const total = Object.values(list.counts).reduce((a, b) => a + b, 0);
    const chip = (status, n, label) => {
      const b = el('button', { type: 'button', class: 'count s-' + (status || 'all'), 'data-status': status,
        'aria-pressed': String(filters.status === status), text: label + ' ' + n });
      b.addEventListener('click', () => { $('#f-status').value = status; applyFilters(); });
      return b;
    };
    box.append(chip('', total, 'all'));
    for (const s of STATUSES) if (list.counts[s]) box.append(chip(s, list.counts[s], s));
  }
  $('#list-order').textContent = list.order === 'id'
    ? 'in id order: this store keeps no catalog, so filters apply a page at a time and there are no counts'
    : 'newest first';
}

// ---- times ----------------------------------------------------------------

// ago is how long before now a recorded time was, in words.
function ago(ms) { return span(Date.now() - ms) + ' ago'; }

// span is a duration in words: 45s, 12m, 3h 5m, 2d 4h.
function span(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + 's';
  const m = Math.floor(s / 60);
  if (m < 60) return m + 'm';
  const h = Math.floor(m / 60);
  if (h < 24) return h + 'h' + (m % 60 ? ' ' + (m % 60) + 'm' : '');
  const d = Math.floor(h / 24);
  return d + 'd' + (h % 24 ? ' ' + (h % 24) + 'h' : '');
}

const ENDED = new Set(['completed', 'failed', 'cancelled', 'continued']);

// timesOf is a listing's times: when it started (relative, the recorded
// instant on hover), and how long it ran (ended: from its start to its
// last event) or has been running or parked (until now).
function timesOf(x) {
  const out = [];
  if (x.startedAt) {
    out.push(el('time', { dateTime: new Date(x.startedAt).toISOString(), title: time(x.startedAt), text: 'started ' + ago(x.startedAt) }));
    const took = ENDED.has(x.status) ? 'took ' + span(x.updatedAt - x.startedAt)
      : (x.status === 'suspended' ? 'parked, ' : 'running, ') + span(Date.now() - x.startedAt) + ' so far';
    out.push(el('span', { class: 'took', title: 'last event ' + time(x.updatedAt), text: took }));
  }
  return out;
}

// ---- the execution list and the refs --------------------------------------

// listParams is params plus the list's filters: the query of every list
// request.
function listParams(params) {
  const out = Object.assign({}, params);
  for (const [k, v] of Object.entries(filters)) if (v) out[k] = v;
  return out;
}

// loadExecutions starts the list: live when the browser can stream, else
// its first page fetched. It resolves once the list is shown.
function loadExecutions() {
  ensureControls();
  if (typeof EventSource === 'undefined') {
    setListLive(false, 'not live: this browser cannot stream');
    return fetchExecutions();
  }
  return openLiveList();
}

// moreExecutions shows the next page: the live list grows by a page up to
// MAX_LIVE_LIST; past it, or when the list is fetched, the page is fetched.
function moreExecutions() {
  if (list.source && list.tailNext === null && list.limit < MAX_LIVE_LIST) {
    list.limit = Math.min(list.limit + LIST_PAGE, MAX_LIVE_LIST);
    return openLiveList();
  }
  return fetchExecutions();
}

// openLiveList (re)opens the live list over the first list.limit
// executions; the list shown stays until its first frame. Each frame is
// the whole page, sent again when it changes. It resolves on the first
// frame or, when the server refuses the stream, once the list is fetched.
function openLiveList() {
  if (list.source) list.source.close();
  return new Promise((resolve, reject) => {
    const src = new EventSource('api/executions/live?' + new URLSearchParams(listParams({ limit: list.limit })).toString());
    list.source = src;
    src.onopen = () => { if (list.source === src) setListLive(true); };
    src.addEventListener('executions', (msg) => {
      if (list.source !== src) return;
      const page = JSON.parse(msg.data);
      list.head = page.executions;
      list.headNext = page.next || '';
      list.order = page.order;
      list.counts = page.counts || null;
      setListLive(true);
      showList();
      resolve();
    });
    src.onerror = () => {
      if (list.source !== src) return;
      if (src.readyState !== EventSource.CLOSED) {
        setListLive(false, 'not live: reconnecting…'); // the browser reconnects by itself
        return;
      }
      // Refused (an error status, not a stream): fetched from here on,
      // starting from what is shown.
      src.close();
      list.source = null;
      setListLive(false, 'not live: reload the page to refresh the list');
      if (list.tailNext === null) list.tailNext = list.headNext;
      list.tail = list.head.concat(list.tail);
      list.head = [];
      list.headNext = '';
      if (list.tail.length) resolve();
      else fetchExecutions().then(resolve, reject);
    };
  });
}

// fetchExecutions fetches the page after the list shown and appends it.
async function fetchExecutions() {
  const params = { limit: LIST_PAGE };
  if (view.next) params.after = view.next;
  const page = await api('executions', listParams(params));
  if (list.tailNext === null && !list.head.length) {
    list.order = page.order;
    list.counts = page.counts || null;
  }
  list.tail = list.tail.concat(page.executions);
  list.tailNext = page.next || '';
  showList();
}

function setListLive(on, note) {
  $('#executions').dataset.live = on ? 'on' : 'off';
  const n = $('#list-note');
  n.hidden = on || !note;
  if (note) n.textContent = note;
}

// showList renders the list from its sources, each execution once (a page
// fetched before the live list grew may repeat one), each at the latest
// state the page knows.
function showList() {
  const seen = new Set();
  view.executions = [];
  for (const x of list.head.concat(list.tail)) {
    if (seen.has(x.executionId)) continue;
    seen.add(x.executionId);
    view.executions.push(withLatest(x));
  }
  view.next = list.tailNext !== null ? list.tailNext : list.headNext;
  renderExecutions();
  if (view.latest) renderHeader(view.latest); // its lineage names the listed forks
}

// withLatest is a listing brought up to a later state the page saw (the
// state pane's watch runs ahead of the list, which the server re-lists
// about once a second); once the list has caught up, the list's own.
function withLatest(x) {
  const ahead = view.ahead.get(x.executionId);
  if (!ahead) return x;
  if (ahead.sequence <= x.sequence) {
    view.ahead.delete(x.executionId);
    return x;
  }
  return Object.assign({}, x, ahead);
}

function suspendedOn(st) {
  const on = st.variables && st.variables._suspendedOn;
  return st.status === 'suspended' && on ? on.on : undefined;
}

// renderExecutions draws the list, keeping where the reader was: the
// selection, the scroll and the focused row.
function renderExecutions() {
  const ul = $('#executions');
  const bar = $('#sidebar');
  const top = bar.scrollTop;
  const [sx, sy] = [window.scrollX, window.scrollY];
  const focused = ul.contains(document.activeElement) ? document.activeElement.dataset.id : undefined;
  ul.replaceChildren();
  for (const x of view.executions) {
    const a = execLink(x.executionId);
    a.replaceChildren();
    a.append(el('span', { class: 'id', text: x.executionId }));
    const badge = el('span');
    statusBadge(badge, x.status);
    a.append(badge);
    const parent = lastLink(x.forkChain);
    const meta = [x.workflowId, x.length + ' events'];
    if (x.tenant) meta.push('tenant ' + x.tenant);
    if (x.suspendedOn) meta.push('parked on ' + x.suspendedOn);
    if (parent) meta.push('fork of ' + parent.executionId + ' @#' + parent.sequence);
    if (x.parent && x.parent.executionId) meta.push('child of ' + x.parent.executionId);
    a.append(el('span', { class: 'meta', text: meta.join(' · ') }));
    const times = timesOf(x);
    if (times.length) a.append(el('span', { class: 'times' }, ...times.flatMap((n, i) => (i ? [' · ', n] : [n]))));
    if (x.executionId === view.selected) a.classList.add('selected');
    ul.append(el('li', { 'data-id': x.executionId }, a));
  }
  if (!view.executions.length) ul.append(el('li', { class: 'none', text: Object.values(filters).some(Boolean) ? 'no execution matches the filters' : 'no executions yet' }));
  $('#more-executions').hidden = !view.next;
  renderCounts();
  bar.scrollTop = top;
  if (window.scrollX !== sx || window.scrollY !== sy) window.scrollTo(sx, sy);
  const again = focused === undefined ? null : Array.from(ul.querySelectorAll('a')).find((n) => n.dataset.id === focused);
  if (again) again.focus({ preventScroll: true });
}

async function loadRefs() {
  const { refs } = await api('refs');
  const ul = $('#refs');
  ul.replaceChildren();
  if (!refs.length) ul.append(el('li', { class: 'none', text: 'no refs' }));
  for (const r of refs) {
    ul.append(el('li', { 'data-ref': r.name }, el('code', { text: r.name }), ' → ', execLink(r.executionId), ' ',
      el('span', { class: 'muted', text: 'v' + r.version })));
  }
}
