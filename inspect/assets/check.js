// Loom inspector: divergence and code pins — the Replay panel of the
// execution view. Loaded after app.js, whose helpers ($, el, execLink) and
// view it uses. It marks two things:
//
//   - from the log alone: a park on __loom_diverged__, the runtime having
//     stopped a replay that parted from the log (the row is flagged by
//     app.js; the panel says why and how to go on);
//   - against the app's code, when the inspector can ask the app
//     (api/session says check: loom inspect --app, or an inspector mounted
//     in the app): api/check's verdict on the whole log, asked when an
//     execution opens and on demand, with the row where the code parts
//     from the log marked, and a code-pin mismatch's two pins.
//
// Its names live in one function scope, so they never collide with the
// other scripts' globals.
'use strict';

(() => {
  const checking = {
    on: false,    // the inspector can ask the app
    id: null,     // the execution the verdict is for
    report: null, // its ReplayReport, once answered
    error: null,  // or the refusal
    asked: 0,     // drops answers to older requests
  };

  const VERDICTS = {
    'compatible': 'replays compatibly under the app\'s code',
    'diverged': 'the app\'s code parts from this log',
    'parks-differently': 'the app\'s code serves the log but stands elsewhere',
    'code-pin-mismatch': 'recorded under another code pin than the app\'s flow',
    'unknown-flow': 'the app has no flow of this id',
    'unreadable': 'the log cannot be folded',
  };

  function panel() {
    let p = $('#replay');
    if (p) return p;
    p = el('section', { id: 'replay', 'aria-labelledby': 'replay-title', 'aria-live': 'polite' },
      el('h3', { id: 'replay-title', text: 'Replay' }),
      el('div', { id: 'replay-body' }));
    $('#exec-header').after(p);
    return p;
  }

  // divergedPark is the EXECUTION_SUSPENDED of the park on __loom_diverged__
  // the execution stands on, if it does.
  function divergedPark() {
    const st = view.latest;
    const on = st && st.status === 'suspended' && st.variables ? st.variables._suspendedOn : null;
    if (!on || on.on !== '__loom_diverged__') return null;
    return view.events.find((e) => e.sequence === on.seq && e.eventType === 'EXECUTION_SUSPENDED') || { sequence: on.seq, payload: {} };
  }

  function seqLink(seq) { return execLink(view.selected, '#' + seq, seq); }

  function parkNote(ev) {
    const p = ev.payload || {};
    return el('div', { class: 'replay-verdict v-diverged', 'data-verdict': 'parked-diverged' },
      el('p', {}, el('strong', { text: 'Replay diverged' }), ': the runtime parked this execution at ', seqLink(ev.sequence),
        ' on ', el('code', { text: '__loom_diverged__' }), ' before a step the log does not have ran.'),
      p.reason ? el('p', { class: 'reason' }, 'why: ', el('span', { class: 'error-text', text: p.reason })) : null,
      el('p', { class: 'muted' }, 'Fix the flow\'s code and answer the gate with null (', el('code', { text: 'loom resume ' + view.selected + ' --event __loom_diverged__' }),
        '), or move the execution onto another flow with resume-as.'));
  }

  function verdictNode(rep) {
    const v = rep.verdict;
    const d = el('div', { class: 'replay-verdict v-' + v, 'data-verdict': v },
      el('p', {}, el('strong', { text: VERDICTS[v] || v }), ' (' + rep.length + ' events checked' + (rep.status ? ', ' + rep.status : '') + ')'));
    if (rep.sequence !== undefined && rep.sequence !== null) {
      d.append(el('p', { class: 'replay-where' }, 'at ', seqLink(rep.sequence), ': the log has ', el('code', { text: rep.expected || 'nothing' }),
        ', the code ', el('code', { text: rep.got || 'nothing' })));
    }
    if (v === 'code-pin-mismatch') {
      d.append(el('p', { class: 'replay-pins' }, 'recorded pin ', el('code', { text: rep.recordedPin || '(none: started unpinned)' }),
        ', the app\'s flow ', el('code', { text: rep.registeredPin || '(none)' })));
    }
    if (rep.path) d.append(el('p', { class: 'replay-path' }, 'in the code at ', el('code', { text: rep.path })));
    if (rep.detail) d.append(el('p', { class: 'muted replay-detail', text: rep.detail }));
    return d;
  }

  // render draws the panel from what is known and marks the timeline row
  // the verdict names.
  function render() {
    const id = view.selected;
    if (!id) return;
    const parts = [];
    const park = divergedPark();
    if (park) parts.push(parkNote(park));
    if (checking.on) {
      const again = el('button', { type: 'button', id: 'replay-again', text: 'check again' });
      again.addEventListener('click', () => ask(id));
      if (checking.id === id && checking.report) parts.push(verdictNode(checking.report));
      else if (checking.id === id && checking.error) parts.push(el('p', { class: 'act-error', role: 'alert' }, 'The check was refused: ' + checking.error));
      else parts.push(el('p', { class: 'muted', text: 'checking the log against the app\'s code…' }));
      parts.push(el('p', {}, again));
    } else if (!park) {
      parts.push(el('p', { class: 'muted' }, 'Not checked against the app\'s code: serve the inspector with ', el('code', { text: '--app' }),
        ' to see whether this log replays under the code deployed.'));
    }
    const p = panel();
    p.dataset.execution = id;
    // Redrawn only when it changed: the header's status redraws often, and
    // a redraw would take the keyboard's focus (and the reader's place).
    const next = el('div', {}, ...parts);
    if (next.innerHTML !== $('#replay-body').innerHTML) $('#replay-body').replaceChildren(...next.childNodes);
    mark();
  }

  // mark flags the row where the app's code parts from the log.
  function mark() {
    const rep = checking.id === view.selected ? checking.report : null;
    const seq = rep && rep.verdict !== 'compatible' && rep.sequence !== undefined && rep.sequence !== null ? String(rep.sequence) : null;
    document.querySelectorAll('#timeline li.diverges-here').forEach((li) => {
      if (li.dataset.seq === seq) return;
      li.classList.remove('diverges-here');
      li.querySelectorAll('.diverges-badge').forEach((b) => b.remove());
    });
    if (seq === null) return;
    const li = document.querySelector('#timeline li[data-seq="' + seq + '"]');
    if (!li || li.classList.contains('diverges-here')) return;
    li.classList.add('diverges-here');
    li.querySelector('.type').after(el('span', { class: 'diverges-badge', title: rep.detail || '', text: 'the app\'s code parts here' }));
  }

  async function ask(id) {
    const n = ++checking.asked;
    checking.id = id;
    checking.report = null;
    checking.error = null;
    render();
    try {
      const res = await api('check', { id });
      if (n !== checking.asked) return;
      checking.report = res.report;
    } catch (err) {
      if (n !== checking.asked) return;
      checking.error = String(err.message || err);
    }
    if (view.selected === id) render();
  }

  function opened() {
    const id = $('#exec-header').dataset.execution;
    if (!id) return;
    if (checking.on && checking.id !== id) ask(id);
    else render();
  }

  async function initCheck() {
    try {
      const s = await api('session');
      checking.on = !!s.check;
    } catch (_) {
      checking.on = false; // not logged in, or no such endpoint: the log alone
    }
    const watch = new MutationObserver(opened);
    watch.observe($('#exec-header'), { attributes: true, attributeFilter: ['data-execution'] });
    watch.observe($('#exec-status'), { childList: true, characterData: true, subtree: true });
    new MutationObserver(mark).observe($('#timeline'), { childList: true });
    opened();
  }

  initCheck();
})();
