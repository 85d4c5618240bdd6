// Loom inspector: the panes of the execution view — the state at the
// slider's sequence (frames, decisions, gates, forks), the pending panel of
// a live execution, and the chart of steps and waits over time — and the
// renderings they share: recorded times and durations, errors, and JSON
// folded behind <details> with a copy button. Loaded before app.js, whose
// helpers ($, el, json, time, statusBadge, none, execLink, lastLink) and
// view these functions use when they are called. Every time shown is a
// recorded timestamp (or one computed from recorded values, such as a
// failure's time plus its recorded delay): never the page's clock.
'use strict';

const MAX_GANTT_ROWS = 300; // the chart draws the first 300 steps and waits

// ---- recorded times and durations ----------------------------------------

// timeNode is a recorded instant: ISO 8601 text, the raw epoch
// milliseconds on hover.
function timeNode(ms) {
  const d = new Date(ms);
  if (typeof ms !== 'number' || isNaN(d.getTime())) return el('code', { text: json(ms) });
  return el('time', { datetime: d.toISOString(), title: ms + ' ms since the epoch', text: d.toISOString() });
}

// took says a duration in milliseconds the way people read it: 250 ms,
// 1.25 s, 2 min 5 s, 1 h 30 min, 1 d 2 h.
function took(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '';
  if (ms < 0) return '-' + took(-ms);
  if (ms < 1000) return ms + ' ms';
  if (ms < 60000) return Number((ms / 1000).toFixed(3)) + ' s';
  const s = Math.round(ms / 1000);
  const units = [['d', 86400], ['h', 3600], ['min', 60], ['s', 1]];
  const parts = [];
  let rest = s;
  for (const [name, size] of units) {
    const n = Math.floor(rest / size);
    rest -= n * size;
    if (n && parts.length < 2) parts.push(n + ' ' + name);
    else if (parts.length) break;
  }
  return parts.join(' ');
}

// ---- errors and JSON ------------------------------------------------------

// errorFields is a recorded error object ({message, type?, name?, code?,
// …}, as the kernel and its plugins record them), or null for another
// value.
function errorFields(v) {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return null;
  return typeof v.message === 'string' || v.code !== undefined || typeof v.type === 'string' ? v : null;
}

// errorText is an error as text: its type (or name) and code, then its
// message, never as escaped JSON; another value as compact JSON.
function errorText(v) {
  const f = errorFields(v);
  if (!f) return typeof v === 'string' ? v : json(v, 200);
  const kind = [f.type !== undefined ? f.type : f.name, f.code !== undefined ? 'code ' + json(f.code).replace(/^"|"$/g, '') : undefined]
    .filter((x) => x !== undefined && x !== null && x !== '').map(String);
  const msg = typeof f.message === 'string' ? f.message : '';
  if (!kind.length) return msg;
  return kind.join(' · ') + (msg ? ': ' + msg : '');
}

// jsonBlock folds value behind a summary: opened, it shows the value as
// indented JSON, with a button that copies it, rendered on first opening.
// key names the block across redraws: one the reader opened stays open.
function jsonBlock(summary, value, label, key) {
  const sum = el('summary', { title: 'show ' + label + ' as indented JSON' }, ...summary);
  const d = el('details', { class: 'json', 'data-key': key }, sum);
  d.addEventListener('toggle', () => {
    if (d.open) {
      view.open.add(key);
      if (!d.querySelector('.json-body')) d.append(jsonBody(value, label));
    } else {
      view.open.delete(key);
    }
  });
  if (view.open.has(key)) d.open = true;
  return d;
}

function jsonBody(value, label) {
  const text = JSON.stringify(value, null, 2);
  const btn = el('button', { type: 'button', class: 'copy', text: 'copy', 'aria-label': 'copy ' + label + ' as JSON' });
  btn.addEventListener('click', (ev) => {
    ev.stopPropagation();
    copyText(text).then((how) => {
      btn.dataset.copied = how;
      btn.textContent = how === 'selected' ? 'selected: press Ctrl+C' : 'copied';
      announce(how === 'selected' ? label + ' selected: press Ctrl+C to copy it' : label + ' copied');
    });
  });
  const parts = [btn];
  if (errorFields(value)) parts.push(el('p', { class: 'error-text', text: errorText(value) }));
  parts.push(el('pre', { class: 'json-text', text }));
  return el('div', { class: 'json-body' }, ...parts);
}

// copyText puts text on the clipboard: through navigator.clipboard where
// the browser allows it, else through the page's hidden textarea and
// execCommand('copy'), leaving it selected when even that is refused. It
// resolves to how: 'clipboard', 'fallback' or 'selected'.
async function copyText(text) {
  if (navigator.clipboard && typeof navigator.clipboard.writeText === 'function') {
    try {
      await navigator.clipboard.writeText(text);
      return 'clipboard';
    } catch (_) {
      // refused (no permission, or the page lacks focus): the fallback
    }
  }
  const buf = $('#copy-buffer');
  const back = document.activeElement;
  buf.value = text;
  buf.focus({ preventScroll: true });
  buf.select();
  let copied = false;
  try {
    copied = document.execCommand('copy');
  } catch (_) {
    copied = false;
  }
  if (!copied) return 'selected';
  if (back && typeof back.focus === 'function') back.focus({ preventScroll: true });
  return 'fallback';
}

function announce(text) { $('#announce').textContent = text; }

// ---- kernel decisions -----------------------------------------------------

// kernelDecision says what one of the kernel's own decisions means, from
// its reserved id (decide.go, timers.go, patch.go and the in-doubt
// verdict): {label, time?} — time when its choice is an instant — or null
// for an application's decision.
function kernelDecision(id, choice) {
  if (typeof id !== 'string' || !id.startsWith('__loom_')) return null;
  let m = id.match(/^__loom_(now|random)(?:@([^#]*))?#(\d+)$/);
  if (m) {
    const n = ' #' + m[3] + (m[2] ? ' in parallel branch ' + m[2] : '');
    return m[1] === 'now' ? { label: 'clock reading' + n, time: choice } : { label: 'random seed' + n };
  }
  if ((m = id.match(/^__loom_budget:(.*?)(?:@([^#]*))?#(\d+)$/))) return { label: 'budget grant of ' + m[1] + ' #' + m[3] };
  if ((m = id.match(/^__loom_patch:(.*)$/))) return { label: 'version of patch ' + m[1] };
  if ((m = id.match(/^__loom_verdict:(.*)#(\d+)$/))) return { label: 'operator verdict on step ' + m[1] + ' attempt ' + m[2] };
  if (id === '__loom_deadline') return { label: 'execution deadline', time: choice };
  return { label: 'kernel decision' };
}

// decisionNode renders a decision: a kernel decision by what it means
// (a time as a time), an application's as id = choice.
function decisionNode(id, choice, max) {
  const k = kernelDecision(id, choice);
  if (!k) return el('span', { class: 'decision' }, id + ' = ' + json(choice, max));
  const value = k.time !== undefined ? timeNode(k.time) : el('code', { text: json(choice, max) });
  return el('span', { class: 'decision kernel', 'data-kernel': id }, k.label + ': ', value, ' ',
    el('span', { class: 'muted', text: '(' + id + ')' }));
}

// ---- the state pane -------------------------------------------------------

function renderState(st) {
  $('#state-seq').textContent = '#' + st.sequence;
  statusBadge($('#state-status'), st.status);
  const v = st.variables || {};
  const summary = $('#state-summary');
  summary.replaceChildren(...[
    el('span', {}, 'updated ', time(st.updatedAt)),
    v._input !== undefined ? jsonBlock(['input ', el('code', { text: json(v._input, 120) })], v._input, 'the input', 'state:input') : null,
    v._output !== undefined ? jsonBlock(['output ', el('code', { text: json(v._output, 120) })], v._output, 'the output', 'state:output') : null,
    v._error !== undefined ? jsonBlock([el('span', { class: 'typed' }, 'error: ', errorText(v._error))], v._error, 'the error', 'state:error') : null,
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
    if (g.wakeAt) d.append(el('div', { class: 'muted' }, 'times out ', timeNode(g.wakeAt)));
    if (g.answeredSeq !== undefined) {
      d.append(el('div', {}, 'answered at #' + g.answeredSeq + ', ' + time(g.answeredAt) + ' by ',
        el('span', { class: 'who', text: g.by !== undefined ? json(g.by) : 'an unauthenticated caller' }),
        ': ', el('code', { text: g.answer }), el('span', { class: 'muted', text: ' (waited ' + took(g.answeredAt - g.parkedAt) + ')' })));
    } else if (g.endedBy) {
      d.append(el('div', { class: 'muted', text: 'never answered: ' + g.endedBy }));
    } else {
      d.append(el('div', { class: 'muted', text: 'waiting for an answer' }));
    }
    box.append(d);
  }
}

// retriesUpTo gathers each step's STEP_RETRYING events up to seq, by
// step id: the attempt that failed, its error, and the recorded delay
// before the next one.
function retriesUpTo(seq) {
  const out = new Map();
  for (const e of view.events) {
    if (e.sequence > seq) break;
    if (e.eventType !== 'STEP_RETRYING' || !e.payload || typeof e.payload.stepId !== 'string') continue;
    if (!out.has(e.payload.stepId)) out.set(e.payload.stepId, []);
    out.get(e.payload.stepId).push(e);
  }
  return out;
}

// retryDue is when a STEP_RETRYING's next attempt was due: its recorded
// time plus its recorded delay.
function retryDue(e) {
  const p = e.payload || {};
  return typeof p.delayMs === 'number' ? e.timestamp + p.delayMs : undefined;
}

function attemptsList(retries) {
  return el('ol', { class: 'attempts' }, ...retries.map((e) => {
    const p = e.payload;
    const next = typeof p.attempt === 'number' ? p.attempt : undefined;
    const li = el('li', { 'data-attempt': next !== undefined ? String(next - 1) : '' },
      'attempt ' + (next !== undefined ? next - 1 : '?') + ' failed at ', timeNode(e.timestamp), ': ',
      el('span', { class: 'error-text', text: errorText(p.error) }));
    if (typeof p.delayMs === 'number') li.append('; attempt ' + (next !== undefined ? next : '?') + ' after ' + took(p.delayMs) + ', due ', timeNode(retryDue(e)));
    return li;
  }));
}

function frameTook(f) {
  if (f.startedAt && f.endedAt) {
    return el('span', { class: 'took', title: 'from ' + new Date(f.startedAt).toISOString() + ' to ' + new Date(f.endedAt).toISOString(),
      text: took(f.endedAt - f.startedAt) });
  }
  if (f.startedAt) return el('span', { class: 'took open' }, 'since ', timeNode(f.startedAt));
  return el('span', { class: 'none', text: '' });
}

function frameResult(f) {
  const k = 'frame:' + f.stepId + ':';
  if (f.errorChannel) {
    const p = f.errorPayload;
    const text = errorFields(p) ? errorText(p) : json(p, 160);
    return jsonBlock([el('span', { class: 'typed' }, 'typed error on ' + f.errorChannel + ': ', el('code', { text }))],
      { channel: f.errorChannel, payload: p, error: f.error }, 'the typed error of ' + f.stepId, k + 'error');
  }
  if (f.error !== undefined) {
    return jsonBlock([el('span', { class: 'typed' }, (f.status === 'retrying' ? 'last failure: ' : 'error: '), el('span', { class: 'error-text', text: errorText(f.error) }))],
      f.error, 'the error of ' + f.stepId, k + 'error');
  }
  if (f.output !== undefined) return jsonBlock([el('code', { text: json(f.output, 160) })], f.output, 'the output of ' + f.stepId, k + 'output');
  if (f.input !== undefined) return jsonBlock(['input: ', el('code', { text: json(f.input, 160) })], f.input, 'the input of ' + f.stepId, k + 'input');
  return el('span', { class: 'none', text: 'settled steps keep no input; see the timeline' });
}

function renderFrames(st) {
  const box = $('#frames');
  const frames = Object.values(st.frames || {}).sort((a, b) => a.seq - b.seq);
  if (!frames.length) { box.replaceChildren(none('no step started yet')); return; }
  const retries = retriesUpTo(st.sequence);
  const rows = frames.map((f) => {
    const badge = el('span');
    statusBadge(badge, f.status);
    const result = el('td', {}, frameResult(f));
    if (retries.has(f.stepId)) result.append(attemptsList(retries.get(f.stepId)));
    return el('tr', { 'data-step': f.stepId },
      el('td', {}, el('code', { text: f.stepId })), el('td', {}, badge),
      el('td', { text: [f.kind, f.toolId].filter(Boolean).join(' · ') }),
      el('td', { text: String(f.attempt) }), el('td', {}, frameTook(f)), result);
  });
  box.replaceChildren(el('table', {},
    el('thead', {}, el('tr', {}, ...['step', 'status', 'kind', 'attempt', 'took', 'output / error / input'].map((h) => el('th', { text: h })))),
    el('tbody', {}, ...rows)));
}

function renderDecisions(v) {
  const box = $('#decisions');
  const ds = Object.entries(v._decisions || {}).sort((a, b) => (a[1].seq ?? 0) - (b[1].seq ?? 0));
  if (!ds.length) { box.replaceChildren(none('no decision recorded yet')); return; }
  box.replaceChildren(el('table', {},
    el('thead', {}, el('tr', {}, el('th', { text: 'decision' }), el('th', { text: 'choice' }), el('th', { text: 'at' }))),
    el('tbody', {}, ...ds.map(([id, d]) => {
      const k = kernelDecision(id, d.choice);
      const name = k ? el('td', {}, k.label, el('br'), el('code', { class: 'muted', text: id })) : el('td', {}, el('code', { text: id }));
      const choice = k && k.time !== undefined ? timeNode(k.time) : el('code', { text: json(d.choice, 200) });
      return el('tr', { 'data-decision': id, class: k ? 'kernel' : null }, name, el('td', {}, choice),
        el('td', { text: d.seq !== undefined ? '#' + d.seq : '' }));
    }))));
}

// forkLine is "forked from <parent> at <#seq>", both links.
function forkLine(link) {
  return ['forked from ', execLink(link.executionId), ' at ', execLink(link.executionId, '#' + link.sequence, link.sequence),
    link.simulate ? ' (simulation)' : ''];
}

// spawnedChildren are the children an execution's frames record
// (__loom_spawn:<name> steps that completed with the child's id).
function spawnedChildren(frames) {
  return Object.keys(frames || {}).filter((id) => id.startsWith('__loom_spawn:')).sort()
    .map((id) => frames[id]).filter((f) => f.status === 'completed' && f.output && f.output.childId);
}

function renderForks(v, frames) {
  const box = $('#forks');
  box.replaceChildren();
  const chain = Array.isArray(v._forkChain) ? v._forkChain : [];
  if (chain.length) {
    box.append(el('ol', {}, ...chain.map((link) => el('li', {}, ...forkLine(link)))));
    if (v._forkedBy !== undefined) box.append(el('p', { class: 'muted', text: 'forked by ' + json(v._forkedBy) }));
  }
  const markers = view.events.filter((e) => e.eventType === '__loom_fork__');
  if (markers.length) {
    const p = el('p', { class: 'muted' }, 'fork marker at ');
    markers.forEach((e, i) => p.append(i ? ', ' : '', execLink(view.selected, '#' + e.sequence, e.sequence)));
    box.append(p);
  }
  const forks = view.executions.filter((x) => {
    const p = lastLink(x.forkChain);
    return p && p.executionId === view.selected;
  });
  if (forks.length) {
    const p = el('p', {}, 'forks of this execution: ');
    forks.forEach((c, i) => {
      const link = lastLink(c.forkChain);
      p.append(i ? ', ' : '', execLink(c.executionId), ' (at ', execLink(view.selected, '#' + link.sequence, link.sequence), ')');
    });
    box.append(p);
  }
  const up = v._parent;
  if (up && up.executionId) box.append(el('p', { class: 'child-of' }, 'child of ', execLink(up.executionId), ' (as ' + up.name + ')'));
  const kids = spawnedChildren(frames);
  if (kids.length) {
    const p = el('p', { class: 'children' }, 'children: ');
    kids.forEach((f, i) => p.append(i ? ', ' : '', execLink(f.output.childId), ' (' + f.output.flow + ')'));
    box.append(p);
  }
  if (v._continuedTo) box.append(el('p', { class: 'continued' }, 'continued as ', execLink(v._continuedTo)));
  if (!box.childNodes.length) box.append(none('not a fork or a child, and no fork or child of it is listed'));
}

// ---- the pending panel ----------------------------------------------------

const ENDED_STATUSES = ['completed', 'failed', 'cancelled', 'continued'];

// renderPending shows what a running or parked execution waits on, from
// its latest state and the log: each step in progress (its attempt, its
// last failure and when its next attempt is due), and the park (its gate,
// its timeout and who may answer it). It is hidden once the execution
// has ended.
function renderPending(st) {
  const box = $('#pending');
  if (!st || ENDED_STATUSES.includes(st.status)) {
    box.hidden = true;
    $('#pending-body').replaceChildren();
    return;
  }
  box.hidden = false;
  box.dataset.seq = String(st.sequence);
  const body = [];
  const busy = Object.values(st.frames || {}).filter((f) => ['running', 'retrying', 'in-doubt'].includes(f.status)).sort((a, b) => a.seq - b.seq);
  const retries = retriesUpTo(st.sequence);
  for (const f of busy) body.push(pendingStep(f, retries.get(f.stepId) || []));
  const park = st.variables && st.variables._suspendedOn;
  if (st.status === 'suspended' && park) body.push(pendingPark(park, st));
  if (!body.length) body.push(none('running at #' + st.sequence + ', with no step in progress'));
  replaceIfChanged($('#pending-body'), body);
}

function pendingStep(f, retries) {
  const d = el('div', { class: 'pending-step', 'data-step': f.stepId },
    el('p', {}, 'step ', el('code', { text: f.stepId }), ' ', el('span', { class: 'status s-' + f.status, text: f.status }),
      ', attempt ' + f.attempt, f.startedAt ? el('span', {}, ', started ', timeNode(f.startedAt)) : ''));
  if (f.error !== undefined) {
    d.append(el('p', { class: 'last-failure' }, 'last failure: ', el('span', { class: 'error-text', text: errorText(f.error) })));
  }
  const last = retries[retries.length - 1];
  if (f.status === 'retrying' && last && retryDue(last) !== undefined) {
    d.append(el('p', { class: 'next-retry' }, 'next attempt (' + (last.payload.attempt ?? '?') + ') due ', timeNode(retryDue(last)),
      ', ' + took(last.payload.delayMs) + ' after the failure at ', timeNode(last.timestamp)));
  }
  if (f.status === 'in-doubt') {
    d.append(el('p', { class: 'who-answers' }, 'who may answer: an operator who checked whether it acted: ',
      el('code', { text: 'loom resolve ' + view.selected + ' --done OUTPUT' }), ' or ', el('code', { text: 'loom resolve ' + view.selected + ' --rerun' })));
  }
  return d;
}

// parkEvent is the EXECUTION_SUSPENDED of a park, for what the folded
// park does not keep (its reason).
function parkEvent(park) {
  return view.events.find((e) => e.sequence === park.seq && e.eventType === 'EXECUTION_SUSPENDED');
}

function pendingPark(park, st) {
  const id = view.selected;
  const ev = parkEvent(park);
  const p = (ev && ev.payload) || {};
  const d = el('div', { class: 'pending-park', 'data-gate': park.on },
    el('p', {}, 'parked on ', el('code', { class: 'gate-name', text: park.on }), ' since #' + park.seq,
      ev ? el('span', {}, ', ', timeNode(ev.timestamp)) : ''));
  if (park.on !== '__loom_select__' && park.on !== '__loom_indoubt__') {
    const t = el('p', { class: 'timeout' }, 'times out: ');
    if (park.wakeAt !== undefined) {
      t.append(timeNode(park.wakeAt));
      if (park.timeoutMs !== undefined) t.append(' (' + took(park.timeoutMs) + ' after it parked)');
    } else {
      t.append('never: it waits until answered');
    }
    d.append(t);
  }
  if (park.correlationKey && park.on !== '__loom_child__') d.append(el('p', {}, 'correlation key ', el('code', { text: park.correlationKey })));
  if (p.reason) d.append(el('p', { class: 'reason' }, 'why: ', p.reason));
  d.append(el('div', { class: 'who-answers' }, 'who may answer: ', ...whoAnswers(park, st, id)));
  return d;
}

// whoAnswers says who may answer a park, from what its suspension
// records, as `loom gate` does.
function whoAnswers(park, st, id) {
  const cmd = (s) => el('code', { text: s });
  switch (park.on) {
    case '__loom_indoubt__':
      return ['an operator who checked whether step ', cmd(park.stepId || '?'), ' attempt ' + (park.attempt ?? '?') + ' acted: ',
        cmd('loom resolve ' + id + ' --done OUTPUT'), ' (it did) or ', cmd('loom resolve ' + id + ' --rerun'), ' (it did not)'];
    case '__loom_diverged__':
      return ['an operator, once the flow\'s code is fixed: ', cmd('loom resume ' + id + ' --event __loom_diverged__')];
    case '__loom_sleep__':
      return ['its timer, at ', park.wakeAt !== undefined ? timeNode(park.wakeAt) : 'its wake time'];
    case '__loom_child__':
      return ['the end of its child ', park.correlationKey ? execLink(park.correlationKey) : 'execution'];
    case '__loom_select__': {
      const waits = Array.isArray(st.variables._waits) ? st.variables._waits : [];
      return ['the first of its waits to be answered:', el('ul', { class: 'waits' }, ...waits.map((w) => el('li', { 'data-wait': w.waitId },
        ...(w.kind === 'gate' ? ['gate ', cmd(w.on), ': ', cmd('loom resume ' + id + ' --event ' + w.on + ' --payload JSON')]
          : w.kind === 'message' ? ['a message on topic ', cmd(w.topic), ': ', cmd('loom send ' + id + ' --topic ' + w.topic + ' --payload JSON')]
            : w.kind === 'timer' ? ['a timer, at ', w.wakeAt !== undefined ? timeNode(w.wakeAt) : '?'] : [w.kind]))))];
    }
  }
  if (park.on.startsWith('__loom_')) return ['the kernel (', cmd(park.on), ' is a kernel gate): no caller answers it'];
  const out = [];
  if (park.stepId) out.push('the answer of human step ', cmd(park.stepId), ': ');
  out.push('a caller the app\'s ResumeAuthenticator admits, with an answer its resume schema for ', cmd(park.on), ' accepts: ',
    cmd('loom resume ' + id + ' --event ' + park.on + ' --payload JSON'));
  if (park.wakeAt !== undefined) out.push('; or its timer, at the timeout');
  return out;
}

// ---- steps and waits over time --------------------------------------------

// spansOf reads the log into the spans of its steps (STEP_STARTED to the
// event that settles the step, with its retries) and its waits
// (EXECUTION_SUSPENDED to its answer or the execution's end), in the
// order they began. A span still open at the end of the log has no end.
function spansOf(events) {
  const out = [];
  const steps = new Map();
  let park = null;
  const end = (s, e, status) => { s.endSeq = e.sequence; s.endAt = e.timestamp; s.status = status; };
  for (const e of events) {
    const p = e.payload || {};
    switch (e.eventType) {
      case 'STEP_STARTED': case 'STEP_RETRYING': case 'EFFECT_INDOUBT': {
        if (typeof p.stepId !== 'string') break;
        let s = steps.get(p.stepId);
        if (!s) {
          s = { kind: 'step', id: p.stepId, startSeq: e.sequence, startAt: e.timestamp, status: 'running', retries: [] };
          steps.set(p.stepId, s);
          out.push(s);
        }
        if (e.eventType === 'STEP_RETRYING') { s.retries.push(e); s.status = 'retrying'; }
        if (e.eventType === 'EFFECT_INDOUBT') s.status = 'in-doubt';
        break;
      }
      case 'STEP_COMPLETED': case 'STEP_FAILED': case 'STEP_CANCELLED': {
        const s = steps.get(p.stepId);
        if (!s) break;
        end(s, e, e.eventType.slice(5).toLowerCase());
        steps.delete(p.stepId);
        break;
      }
      case 'EXECUTION_SUSPENDED':
        park = { kind: 'park', id: p.on, startSeq: e.sequence, startAt: e.timestamp, status: 'parked', wakeAt: p.wakeAt };
        out.push(park);
        break;
      case 'TIMER_FIRED':
        if (park) park.byTimer = true;
        break;
      case 'EXECUTION_RESUMED':
        if (park) { end(park, e, park.byTimer ? 'timed out' : 'answered'); park = null; }
        break;
      case 'EXECUTION_COMPLETED': case 'EXECUTION_FAILED': case 'EXECUTION_CANCELLED': case 'EXECUTION_CONTINUED':
        if (park) { end(park, e, 'ended unanswered'); park = null; }
        for (const s of steps.values()) end(s, e, 'unsettled');
        steps.clear();
        break;
    }
  }
  return out;
}

// renderGantt draws the spans as bars on one time axis, from the first
// recorded event to the last: each bar placed by its recorded start and
// end (CSS custom properties --a and --w, fractions of the axis), each a
// button that moves the slider to where the span ends.
function renderGantt() {
  const box = $('#gantt');
  const evs = view.events;
  if (!evs.length) { box.replaceChildren(); return; }
  const t0 = evs[0].timestamp;
  const t1 = evs[evs.length - 1].timestamp;
  const span = Math.max(t1 - t0, 1);
  const at = (ms) => Math.min(Math.max((ms - t0) / span, 0), 1);
  const spans = spansOf(evs);
  $('#gantt-span').textContent = spans.length ? took(t1 - t0) + ' from first to last event' : '';
  const axis = el('li', { class: 'g-axis', 'aria-hidden': 'true' }, el('span', { class: 'g-label' }),
    el('span', { class: 'g-track' }, el('span', { class: 'g-from', text: new Date(t0).toISOString() }),
      el('span', { class: 'g-to', text: new Date(t1).toISOString() })), el('span', { class: 'g-took' }));
  const rows = spans.slice(0, MAX_GANTT_ROWS).map((s) => ganttRow(s, at, t1));
  const more = spans.length > MAX_GANTT_ROWS ? [el('li', { class: 'none', text: (spans.length - MAX_GANTT_ROWS) + ' more not drawn' })] : [];
  if (!spans.length) rows.push(el('li', { class: 'none', text: 'no step or wait recorded yet' }));
  box.replaceChildren(axis, ...rows, ...more);
  box.dataset.from = String(t0);
  box.dataset.to = String(t1);
  moveGanttCursor();
}

function ganttRow(s, at, t1) {
  const open = s.endAt === undefined;
  const endAt = open ? t1 : s.endAt;
  const a = at(s.startAt);
  const w = at(endAt) - a;
  const what = s.kind === 'step' ? 'step ' + s.id : 'wait on ' + s.id;
  const length = open ? (s.kind === 'step' ? 'still ' + s.status : 'still parked') : took(s.endAt - s.startAt);
  const target = open ? s.startSeq : s.endSeq;
  const bar = el('button', { type: 'button', class: 'g-bar' + (open ? ' open' : ''),
    'aria-label': what + ': ' + length + ', from #' + s.startSeq + (open ? '' : ' to #' + s.endSeq) + '; show the state at #' + target,
    title: what + ': ' + new Date(s.startAt).toISOString() + (open ? ' →' : ' → ' + new Date(s.endAt).toISOString()),
    'data-from': String(s.startAt), 'data-to': open ? '' : String(s.endAt) });
  bar.style.setProperty('--a', String(a));
  bar.style.setProperty('--w', String(w));
  bar.addEventListener('click', () => jumpTo(target));
  const track = el('span', { class: 'g-track' }, bar);
  for (const r of s.retries || []) {
    const tick = el('span', { class: 'g-retry', title: 'attempt ' + ((r.payload.attempt ?? 1) - 1) + ' failed: ' + errorText(r.payload.error) +
      (typeof r.payload.delayMs === 'number' ? '; next after ' + took(r.payload.delayMs) : '') });
    tick.style.setProperty('--a', String(at(r.timestamp)));
    if (retryDue(r) !== undefined) tick.style.setProperty('--w', String(Math.max(at(retryDue(r)) - at(r.timestamp), 0)));
    track.append(tick);
  }
  return el('li', { class: 'g-row g-' + s.kind + ' gs-' + s.status.replace(/\s+/g, '-'), 'data-kind': s.kind, 'data-id': s.id },
    el('span', { class: 'g-label', title: what }, el('code', { text: s.id })), track, el('span', { class: 'g-took', text: length }));
}

// moveGanttCursor puts the chart's cursor (a line across every track) at
// the recorded time of the slider's event.
function moveGanttCursor() {
  const box = $('#gantt');
  const e = eventAt(view.seq);
  const from = Number(box.dataset.from);
  const to = Number(box.dataset.to);
  const ok = Boolean(e) && Number.isFinite(from) && Number.isFinite(to);
  box.classList.toggle('has-cursor', ok);
  if (!ok) { delete box.dataset.cursor; return; }
  box.style.setProperty('--cursor', String(Math.min(Math.max((e.timestamp - from) / Math.max(to - from, 1), 0), 1)));
  box.dataset.cursor = String(e.sequence);
}
