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
};

// ---- the execution list and the refs --------------------------------------

// listParams is params plus the page's own ?tenant= filter, if any: the
// query of every list request.
function listParams(params) {
  const tenant = new URLSearchParams(location.search).get('tenant');
  return tenant ? Object.assign({ tenant }, params) : params;
}

// loadExecutions starts the list: live when the browser can stream, else
// its first page fetched. It resolves once the list is shown.
function loadExecutions() {
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
    if (x.suspendedOn) meta.push('parked on ' + x.suspendedOn);
    if (parent) meta.push('fork of ' + parent.executionId + ' @#' + parent.sequence);
    if (x.parent && x.parent.executionId) meta.push('child of ' + x.parent.executionId);
    a.append(el('span', { class: 'meta', text: meta.join(' · ') }));
    if (x.executionId === view.selected) a.classList.add('selected');
    ul.append(el('li', { 'data-id': x.executionId }, a));
  }
  $('#more-executions').hidden = !view.next;
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
