// Loom inspector: the state pane — the folded state at the slider's
// sequence, as frames, decisions, gates and forks. Loaded before app.js,
// whose helpers ($, el, json, time, statusBadge, none, execLink, lastLink)
// and view these functions use when they are called.
'use strict';

function renderState(st) {
  $('#state-seq').textContent = '#' + st.sequence;
  statusBadge($('#state-status'), st.status);
  const v = st.variables || {};
  const summary = $('#state-summary');
  summary.replaceChildren(...[
    el('span', {}, 'updated ', time(st.updatedAt)),
    v._input !== undefined ? el('span', {}, 'input ', el('code', { text: json(v._input, 120) })) : null,
    v._output !== undefined ? el('span', {}, 'output ', el('code', { text: json(v._output, 120) })) : null,
    v._error !== undefined ? el('span', { class: 'typed' }, 'error ', json(v._error, 120)) : null,
    v._principal !== undefined ? el('span', {}, 'started by ', el('code', { text: json(v._principal, 60) })) : null,
    ...(Array.isArray(v._shredded) ? v._shredded : []).map((s) =>
      el('span', { class: 'typed shredded' }, 'shredded: the data of ', el('code', { text: String(s.subject) }),
        ' (#' + s.seq + ') reads as shredded markers')),
  ].filter(Boolean));
  renderGates(st);
  renderFrames(st);
  renderDecisions(v);
  renderForks(v, st.frames || {});
  $('#state-json').textContent = JSON.stringify(st, null, 2);
}

// gates pairs each park with what answered it, from the log up to the
// slider: who (APPROVAL_GRANTED) and when (EXECUTION_RESUMED).
function gatesUpTo(seq) {
  const out = [];
  let open = null;
  let approval = null;
  for (const e of view.events) {
    if (e.sequence > seq) break;
    const p = e.payload || {};
    if (e.eventType === 'EXECUTION_SUSPENDED') {
      open = { gate: p.on, parkedSeq: e.sequence, parkedAt: e.timestamp, wakeAt: p.wakeAt };
      out.push(open);
    } else if (e.eventType === 'APPROVAL_GRANTED') {
      approval = p;
    } else if ((e.eventType === 'EXECUTION_RESUMED' || e.eventType === 'TIMER_FIRED') && open && open.answeredSeq === undefined) {
      open.answeredSeq = e.sequence;
      open.answeredAt = e.timestamp;
      open.answer = e.eventType === 'TIMER_FIRED' ? 'timer fired' : json(p.payload, 120);
      open.by = approval ? approval.principal : undefined;
      approval = null;
      open = null;
    } else if (['EXECUTION_CANCELLED', 'EXECUTION_FAILED', 'EXECUTION_COMPLETED'].includes(e.eventType) && open) {
      open.endedBy = e.eventType;
      open = null;
    }
  }
  return out;
}

function renderGates(st) {
  const box = $('#gates');
  box.replaceChildren();
  const gates = gatesUpTo(st.sequence);
  if (!gates.length) { box.append(none('no gate reached yet')); return; }
  for (const g of gates) {
    const d = el('div', { class: 'gate', 'data-gate': g.gate },
      el('span', { class: 'name', text: g.gate }), ' — parked at #' + g.parkedSeq + ', ' + time(g.parkedAt));
    if (g.wakeAt) d.append(el('div', { class: 'muted', text: 'times out ' + time(g.wakeAt) }));
    if (g.answeredSeq !== undefined) {
      d.append(el('div', {}, 'answered at #' + g.answeredSeq + ', ' + time(g.answeredAt) + ' by ',
        el('span', { class: 'who', text: g.by !== undefined ? json(g.by) : 'an unauthenticated caller' }),
        ': ', el('code', { text: g.answer })));
    } else if (g.endedBy) {
      d.append(el('div', { class: 'muted', text: 'never answered: ' + g.endedBy }));
    } else {
      d.append(el('div', { class: 'muted', text: 'waiting for an answer' }));
    }
    box.append(d);
  }
}

function renderFrames(st) {
  const box = $('#frames');
  const frames = Object.values(st.frames || {}).sort((a, b) => a.seq - b.seq);
  if (!frames.length) { box.replaceChildren(none('no step started yet')); return; }
  const rows = frames.map((f) => {
    let result;
    if (f.errorChannel) {
      result = el('span', { class: 'typed' }, 'typed error on ' + f.errorChannel + ': ', el('code', { text: json(f.errorPayload, 160) }));
    } else if (f.error !== undefined) {
      result = el('span', { class: 'typed' }, 'error: ', el('code', { text: json(f.error, 160) }));
    } else if (f.output !== undefined) {
      result = el('code', { text: json(f.output, 160) });
    } else if (f.input !== undefined) {
      result = el('span', {}, 'input: ', el('code', { text: json(f.input, 160) }));
    } else {
      result = el('span', { class: 'none', text: 'settled steps keep no input; see the timeline' });
    }
    const badge = el('span');
    statusBadge(badge, f.status);
    return el('tr', { 'data-step': f.stepId },
      el('td', {}, el('code', { text: f.stepId })), el('td', {}, badge),
      el('td', { text: [f.kind, f.toolId].filter(Boolean).join(' · ') }),
      el('td', { text: String(f.attempt) }), el('td', {}, result));
  });
  box.replaceChildren(el('table', {},
    el('thead', {}, el('tr', {}, ...['step', 'status', 'kind', 'attempt', 'output / error / input'].map((h) => el('th', { text: h })))),
    el('tbody', {}, ...rows)));
}

function renderDecisions(v) {
  const box = $('#decisions');
  const ds = Object.entries(v._decisions || {}).sort((a, b) => (a[1].seq ?? 0) - (b[1].seq ?? 0));
  if (!ds.length) { box.replaceChildren(none('no decision recorded yet')); return; }
  box.replaceChildren(el('table', {},
    el('thead', {}, el('tr', {}, el('th', { text: 'decision' }), el('th', { text: 'choice' }), el('th', { text: 'at' }))),
    el('tbody', {}, ...ds.map(([id, d]) => el('tr', { 'data-decision': id },
      el('td', {}, el('code', { text: id })), el('td', {}, el('code', { text: json(d.choice, 200) })),
      el('td', { text: d.seq !== undefined ? '#' + d.seq : '' }))))));
}

function renderForks(v, frames) {
  const box = $('#forks');
  box.replaceChildren();
  const chain = Array.isArray(v._forkChain) ? v._forkChain : [];
  if (chain.length) {
    const ol = el('ol');
    for (const link of chain) {
      ol.append(el('li', {}, 'forked from ', execLink(link.executionId), ' at #' + link.sequence + (link.simulate ? ' (simulation)' : '')));
    }
    box.append(ol);
    if (v._forkedBy !== undefined) box.append(el('p', { class: 'muted', text: 'forked by ' + json(v._forkedBy) }));
  }
  const markers = view.events.filter((e) => e.eventType === '__loom_fork__').map((e) => '#' + e.sequence);
  if (markers.length) box.append(el('p', { class: 'muted', text: 'fork marker at ' + markers.join(', ') }));
  const children = view.executions.filter((x) => {
    const p = lastLink(x.forkChain);
    return p && p.executionId === view.selected;
  });
  if (children.length) {
    const p = el('p', {}, 'forks of this execution: ');
    children.forEach((c, i) => {
      const link = lastLink(c.forkChain);
      p.append(i ? ', ' : '', execLink(c.executionId), ' (at #' + link.sequence + ')');
    });
    box.append(p);
  }
  const up = v._parent;
  if (up && up.executionId) box.append(el('p', { class: 'child-of' }, 'child of ', execLink(up.executionId), ' (as ' + up.name + ')'));
  const spawned = Object.keys(frames).filter((id) => id.startsWith('__loom_spawn:')).sort();
  const kids = spawned.map((id) => frames[id]).filter((f) => f.status === 'completed' && f.output && f.output.childId);
  if (kids.length) {
    const p = el('p', { class: 'children' }, 'children: ');
    kids.forEach((f, i) => p.append(i ? ', ' : '', execLink(f.output.childId), ' (' + f.output.flow + ')'));
    box.append(p);
  }
  if (!box.childNodes.length) box.append(none('not a fork or a child, and no fork or child of it is listed'));
}
