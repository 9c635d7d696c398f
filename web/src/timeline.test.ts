import { describe, expect, it } from 'vitest'
import type { TraceTypeWithEgress } from './egress'
import { describeArguments, mergeEvents, toTimeline, toTimelineItem } from './timeline'
import type { TraceEvent, TraceType } from './types'

function ev(seq: number, type: TraceType, data: Record<string, unknown> = {}): TraceEvent {
  return { seq, at: '2025-01-01T00:00:00Z', type, data, hash: '', prev_hash: '' }
}

describe('toTimelineItem', () => {
  const cases: {
    name: string
    event: TraceEvent
    title: string
    detail?: string
    facts?: string[]
    tone: string
    link?: { to: string; text: string }
  }[] = [
    {
      name: 'admitted',
      event: ev(1, 'admitted', { prompt_bytes: 22, runs_admitted: 0, tokens_used: 5, tokens_budget: 100 }),
      title: 'Admitted',
      facts: ['prompt 22 bytes', '0 runs admitted before', 'budget 5 of 100 tokens'],
      tone: 'info',
    },
    {
      name: 'started with the default model',
      event: ev(2, 'started', { model: '', fs: 'read-write', changes: 'review' }),
      title: 'Started',
      facts: ['default model', 'workspace read-write', 'changes: review'],
      tone: 'info',
    },
    {
      name: 'an assistant message asking for tools',
      event: ev(3, 'message', { role: 'assistant', content: '', tool_calls: [{ id: 'c1', name: 'shell' }], model: 'scripted' }),
      title: 'Assistant',
      detail: undefined,
      facts: ['asks for shell', 'scripted'],
      tone: 'model',
    },
    {
      name: 'a shell call shows its command',
      event: ev(4, 'tool_call', { id: 'c1', name: 'shell', arguments: '{"command":"ls -la; sleep 1; echo looked"}' }),
      title: 'Tool call: shell',
      detail: '$ ls -la; sleep 1; echo looked',
      tone: 'tool',
    },
    {
      name: 'a tool result shows its output',
      event: ev(5, 'tool_result', { id: 'c1', name: 'shell', exit_code: 0, violation: '', error: '', output: 'looked\n', truncated: false }),
      title: 'Tool output: shell',
      detail: 'looked\n',
      facts: ['exit 0'],
      tone: 'output',
    },
    {
      name: 'a failed tool result',
      event: ev(6, 'tool_result', { name: 'write_file', exit_code: 1, error: 'Read-only file system', output: '', truncated: true }),
      title: 'Tool output: write_file',
      detail: 'error: Read-only file system',
      facts: ['exit 1', 'output cut'],
      tone: 'warn',
    },
    {
      name: 'usage',
      event: ev(7, 'usage', { input: 120, output: 30, budget_used: 150, budget_tokens: 0 }),
      title: 'Tokens: 120 in, 30 out',
      facts: ['150 tokens used, no budget limit'],
      tone: 'info',
    },
    { name: 'violation', event: ev(8, 'violation', { limit: 'memory' }), title: 'Limit reached: memory', tone: 'bad' },
    {
      name: 'paused',
      event: ev(9, 'paused', { budget_used: 100, budget_tokens: 100 }),
      title: 'Paused: the token budget cannot hold the next model call',
      facts: ['budget 100 of 100 tokens'],
      tone: 'warn',
    },
    {
      name: 'retry',
      event: ev(9, 'retry', { attempt: 2, status: 429, wait_ms: 1000, message: 'rate limit reached' }),
      title: 'Model call retried (try 2)',
      detail: 'rate limit reached',
      facts: ['provider answered 429', 'waiting 1 s'],
      tone: 'warn',
    },
    {
      name: 'quarantined',
      event: ev(10, 'quarantined', { violations: 3, window_s: 3600 }),
      title: 'Agent quarantined',
      detail: '3 violations within the window; its owner must release it.',
      tone: 'bad',
    },
    {
      name: 'ended completed',
      event: ev(11, 'ended', { status: 'completed', reason: 'the model answered', tokens: { input: 200, output: 50 } }),
      title: 'Ended: completed',
      detail: 'the model answered',
      facts: ['200 in, 50 out tokens'],
      tone: 'good',
    },
    {
      name: 'ended killed',
      event: ev(12, 'ended', { status: 'killed', violation: null }),
      title: 'Ended: killed',
      tone: 'bad',
    },
    {
      name: 'reconciled',
      event: ev(13, 'reconciled', { previous_status: 'running' }),
      title: 'Reconciled after a restart',
      detail: 'It was running when the server stopped.',
      tone: 'warn',
    },
    {
      name: 'reattached',
      event: ev(15, 'reattached', {}),
      title: 'Re-attached after a restart',
      detail: 'The run’s sandbox outlived the server; the run goes on from where it was.',
      tone: 'warn',
    },
    {
      name: 'retrieved for the message: the passages with their names',
      event: ev(40, 'retrieved', {
        items: [
          { document_id: 'doc_1', chunk_id: 'chk_1', name: 'guide.md', source: 'private', score: 0.91 },
          { document_id: 'doc_1', chunk_id: 'chk_2', name: 'guide.md', source: 'private', score: 0.42 },
          { document_id: 'doc_2', chunk_id: 'chk_9', name: 'handbook.md', source: 'library', score: 0.0164 },
        ],
        confidence: 0.812,
        answerable: true,
        ranker: 'fused',
      }),
      title: 'Retrieved 3 passages (confidence 0.81)',
      detail: 'guide.md · private · score 0.91\nguide.md · private · score 0.42\nhandbook.md · library · score 0.016',
      facts: ['for the message', 'BM25 and embeddings'],
      tone: 'info',
    },
    {
      name: 'retrieved for search_documents, degraded to BM25 with a note',
      event: ev(41, 'retrieved', {
        items: [{ document_id: 'doc_1', chunk_id: 'chk_1', name: 'guide.md', source: 'private', score: 7.25 }],
        confidence: 0.6,
        answerable: true,
        ranker: 'bm25',
        note: 'the embedder is unavailable: BM25 alone',
        tool_call_id: 'call_1',
      }),
      title: 'Retrieved 1 passage (confidence 0.60)',
      detail: 'guide.md · private · score 7.25\nnote: the embedder is unavailable: BM25 alone',
      facts: ['for search_documents', 'BM25'],
      tone: 'info',
    },
    {
      name: 'retrieved nothing relevant: no names, the confidence said',
      event: ev(42, 'retrieved', { items: [], confidence: 0.1, answerable: false, ranker: 'bm25' }),
      title: 'Nothing relevant found (confidence 0.10)',
      detail: undefined,
      facts: ['for the message', 'BM25'],
      tone: 'info',
    },
    {
      name: 'retrieved but not answerable: weak passages are not shown as found',
      event: ev(43, 'retrieved', {
        items: [{ document_id: 'doc_1', chunk_id: 'chk_1', name: 'guide.md', source: 'private', score: 0.01 }],
        confidence: 0.05,
        answerable: false,
        ranker: 'bm25',
      }),
      title: 'Nothing relevant found (confidence 0.05)',
      detail: undefined,
      tone: 'info',
    },
    {
      name: 'retrieval that failed says so, not that nothing was found',
      event: ev(44, 'retrieved', { error: 'The document store is not available right now.', tool_call_id: 'call_2' }),
      title: 'Retrieval failed: The document store is not available right now.',
      facts: ['for search_documents'],
      tone: 'warn',
    },
    {
      name: 'terminal opened',
      event: ev(16, 'terminal_opened', { user: 'Alice', user_id: 'usr_1' }),
      title: 'Terminal opened by Alice',
      tone: 'info',
    },
    {
      name: 'terminal closed with its byte counts',
      event: ev(17, 'terminal_closed', { user: 'Alice', user_id: 'usr_1', bytes_in: 1, bytes_out: 420 }),
      title: 'Terminal closed by Alice',
      facts: ['1 byte typed', '420 bytes shown'],
      tone: 'info',
    },
    {
      name: 'started by an agent CLI',
      event: ev(18, 'started', { driver: 'claude-code', model: 'sonnet', fs: 'read-write', changes: 'review' }),
      title: 'Started',
      facts: ['Claude Code', 'model sonnet', 'workspace read-write', 'changes: review'],
      tone: 'info',
    },
    {
      name: 'the CLI’s command starting',
      event: ev(19, 'tool_call', { id: 'cli-1', name: 'codex', command: 'cli-1' }),
      title: 'Codex CLI started',
      detail: undefined,
      tone: 'tool',
    },
    {
      name: 'the CLI’s command ending: its JSON lines are the steps, nothing else printed',
      event: ev(20, 'tool_result', { id: 'cli-1', name: 'codex', exit_code: 0, violation: '', output: '{"type":"turn.completed"}' }),
      title: 'Codex CLI finished',
      detail: undefined,
      facts: ['exit 0'],
      tone: 'output',
    },
    {
      name: 'a builtin tool named like a CLI is still a tool',
      event: ev(21, 'tool_call', { id: 'call_1', name: 'codex', arguments: '{"x":1}' }),
      title: 'Tool call: codex',
      tone: 'tool',
    },
    {
      name: 'a transcript error alone reads as a warning',
      event: ev(28, 'transcript', { kind: 'error', id: 'item_0', text: 'Model metadata for `test-model` not found. Defaulting to fallback metadata; this can degrade performance and cause issues.' }),
      title: 'CLI warning',
      tone: 'warn',
    },
    {
      name: 'a gateway note',
      event: ev(31, 'gateway_note', { protocol: 'responses', dropped: ['web_search', 'image_generation'] }),
      title: 'The gateway left out: web_search, image_generation',
      detail: 'The provider has no equivalent for these parts of the CLI’s request, so they were not sent.',
      facts: ['via Responses API'],
      tone: 'warn',
    },
    {
      name: 'a CLI’s usage, as the provider counted',
      event: ev(32, 'usage', { input: 900, output: 40, budget_used: 940, budget_tokens: 5000, protocol: 'messages', model: 'sonnet', status: 200 }),
      title: 'Tokens: 900 in, 40 out',
      detail: undefined,
      facts: ['model sonnet', 'via Messages API', 'budget 940 of 5000 tokens'],
      tone: 'info',
    },
    {
      name: 'a CLI’s usage, estimated and aborted',
      event: ev(33, 'usage', { input: 300, output: 12, budget_used: 312, budget_tokens: 0, protocol: 'chat', model: 'm', status: 200, estimated: true, aborted: true }),
      title: 'Tokens (estimated): 300 in, 12 out',
      facts: ['model m', 'via Chat Completions', 'aborted before the answer ended', '312 tokens used, no budget limit'],
      tone: 'warn',
    },
    {
      name: 'a CLI’s usage of a refused call',
      event: ev(34, 'usage', { input: 0, output: 0, protocol: 'responses', model: 'm', status: 502, estimated: true, error: 'the provider did not answer' }),
      title: 'Tokens (estimated): 0 in, 0 out',
      detail: 'error: the provider did not answer',
      facts: ['model m', 'via Responses API', 'provider answered 502'],
      tone: 'warn',
    },
    {
      name: 'an unknown type keeps its data',
      event: ev(14, 'handed_over' as TraceType, { to: 'agt_2' }), // a newer server's type
      title: 'handed_over',
      detail: '{\n  "to": "agt_2"\n}',
      tone: 'info',
    },
    {
      name: 'a delegated run, linked',
      event: ev(15, 'delegated', { tool_call_id: 'c1', run_id: 'run_child111', agent_id: 'agt_2', depth: 2 }),
      title: 'Delegated to agent 2:',
      facts: ['depth 2'],
      tone: 'tool',
      link: { to: '/runs/run_child111', text: 'run child111' },
    },
    {
      name: 'a delegation refused by a tree cap names the cap',
      event: ev(16, 'delegation_refused', { tool: 'delegate', tool_call_id: 'c2', target: 'agt_2', error: 'too deep', cap: 'delegation_depth' }),
      title: 'Delegation refused: too deep',
      detail: 'The chain of delegated runs is as deep as this server allows (--delegation-depth).',
      facts: ['cap: delegation_depth', 'agent agt_2'],
      tone: 'warn',
    },
    {
      name: 'a delegation refused without a cap (no such agent)',
      event: ev(17, 'delegation_refused', { tool: 'delegate', tool_call_id: 'c3', target: 'agt_nope', error: 'agent not found' }),
      title: 'Delegation refused: agent not found',
      detail: undefined,
      facts: ['agent agt_nope'],
      tone: 'warn',
    },
    {
      name: 'an agent creation refused by its cap',
      event: ev(18, 'delegation_refused', { tool: 'create_agent', target: 'linter', error: 'no more agents', cap: 'delegation_create' }),
      title: 'Agent creation refused: no more agents',
      detail: 'The tree has created as many agents as this server allows (--delegation-create).',
      facts: ['cap: delegation_create', 'name linter'],
      tone: 'warn',
    },
    {
      name: 'a created agent, linked',
      event: ev(19, 'agent_created', { tool_call_id: 'c4', agent_id: 'agt_new12345', name: 'linter', fs: 'read-only' }),
      title: 'Created agent linter',
      facts: ['workspace read-only'],
      tone: 'info',
      link: { to: '/agents/agt_new12345', text: 'agent new12345' },
    },
    {
      name: 'paused waiting for a paused delegated run',
      event: ev(20, 'paused', { waiting_for: 'run_child111' }),
      title: 'Paused: waiting for a delegated run, which is paused',
      facts: [],
      tone: 'warn',
      link: { to: '/runs/run_child111', text: 'run child111' },
    },
  ]
  for (const c of cases) {
    it(c.name, () => {
      const item = toTimelineItem(c.event)
      expect(item.seq).toBe(c.event.seq)
      expect(item.title).toBe(c.title)
      if ('detail' in c) expect(item.detail).toBe(c.detail)
      if (c.facts) expect(item.facts).toEqual(c.facts)
      expect(item.tone).toBe(c.tone)
      expect(item.link).toEqual(c.link)
    })
  }
})

describe('describeArguments', () => {
  const cases: [string, unknown, string | undefined][] = [
    ['shell', '{"command":"echo hi"}', '$ echo hi'],
    ['write_file', '{"path":"hello.txt","content":"Hello\\n"}', 'hello.txt (6 bytes)\nHello\n'],
    ['read_file', '{"path":"a/b"}', 'a/b'],
    ['list_files', '{"path":"."}', '.'],
    ['other', '{"x":1}', '{\n  "x": 1\n}'],
    ['shell', '{"command":"cut off', '{"command":"cut off'],
    ['shell', '', undefined],
    ['shell', undefined, undefined],
  ]
  for (const [name, raw, want] of cases) {
    it(`describeArguments(${name}, ${JSON.stringify(raw)})`, () => expect(describeArguments(name, raw)).toBe(want))
  }
})

describe('toTimeline and mergeEvents', () => {
  it('orders by seq and drops repeats', () => {
    const items = toTimeline([ev(2, 'started'), ev(1, 'admitted'), ev(2, 'started')])
    expect(items.map((i) => i.seq)).toEqual([1, 2])
  })
  it('appends in order', () => {
    expect(mergeEvents([ev(1, 'admitted')], [ev(2, 'started'), ev(3, 'usage')]).map((e) => e.seq)).toEqual([1, 2, 3])
  })
})

describe('the timeline with what the page knows', () => {
  const names = new Map([['agt_2', 'linter']])
  it('names a delegated-to agent', () => {
    const item = toTimelineItem(ev(15, 'delegated', { run_id: 'run_child111', agent_id: 'agt_2', depth: 1 }), { names })
    expect(item.title).toBe('Delegated to linter:')
  })
  it('shows a short id for an agent without a known name', () => {
    const item = toTimelineItem(ev(15, 'delegated', { run_id: 'run_child111', agent_id: 'agt_0123456789abcdef', depth: 1 }), { names })
    expect(item.title).toBe('Delegated to agent 01234567:')
  })
  it('names the target of a refused delegation, and keeps what the model wrote otherwise', () => {
    expect(toTimelineItem(ev(16, 'delegation_refused', { tool: 'delegate', target: 'agt_2', error: 'too deep' }), { names }).facts).toEqual(['agent linter'])
    expect(toTimelineItem(ev(16, 'delegation_refused', { tool: 'delegate', target: 'helper-bot', error: 'agent not found' }), { names }).facts).toEqual([
      'agent helper-bot',
    ])
  })
  const ends: { name: string; driver?: string; data: Record<string, unknown>; title: string; tone: string }[] = [
    { name: 'a terminal run its person stopped ended', driver: 'terminal', data: { status: 'cancelled', reason: 'stopped on request' }, title: 'Ended', tone: 'good' },
    { name: 'a terminal run whose time ran out ended', driver: 'terminal', data: { status: 'cancelled', reason: "the terminal run's time ran out" }, title: 'Ended', tone: 'good' },
    {
      name: 'a terminal run cancelled otherwise is cancelled',
      driver: 'terminal',
      data: { status: 'cancelled', reason: 'the person who started the run may no longer run this agent' },
      title: 'Ended: cancelled',
      tone: 'warn',
    },
    { name: 'a killed terminal run is killed', driver: 'terminal', data: { status: 'killed', reason: 'killed on request' }, title: 'Ended: killed', tone: 'bad' },
    { name: 'an agent’s run stopped on request is cancelled', data: { status: 'cancelled', reason: 'stopped on request' }, title: 'Ended: cancelled', tone: 'warn' },
  ]
  for (const c of ends) {
    it(c.name, () => {
      const item = toTimeline([ev(1, 'ended', c.data)], { driver: c.driver })[0]
      expect(item.title).toBe(c.title)
      expect(item.tone).toBe(c.tone)
    })
  }
})

describe('the model’s words', () => {
  it('are Markdown, shown rendered, not monospaced detail', () => {
    const item = toTimelineItem(ev(3, 'message', { role: 'assistant', content: '# Plan\n\n- one' }))
    expect(item.markdown).toBe('# Plan\n\n- one')
    expect(item.detail).toBeUndefined()
  })
})

describe('a delegate call', () => {
  it('names the agent it hands the task to', () => {
    const item = toTimelineItem(ev(2, 'tool_call', { id: 'c1', name: 'delegate', arguments: '{"agent_id":"agt_2","task":"say hello"}' }), {
      names: new Map([['agt_2', 'hello-agent']]),
    })
    expect(item.detail).toBe('to hello-agent:\nsay hello')
  })
  it('shows arguments cut off in the trace as they are', () => {
    expect(toTimelineItem(ev(2, 'tool_call', { name: 'delegate', arguments: '{"agent_id":"agt_2","ta' })).detail).toBe('{"agent_id":"agt_2","ta')
  })
  it('leaves a terminal run’s start without a model', () => {
    expect(toTimelineItem(ev(1, 'started', { driver: 'terminal', fs: 'read-write', changes: 'review' })).facts).toEqual(['workspace read-write', 'changes: review'])
  })
})

describe('the egress proxy’s events', () => {
  // Not in the generated TraceType until the server's side lands (see egress.ts).
  const egressEv = (seq: number, type: TraceTypeWithEgress, data: Record<string, unknown>) => ev(seq, type as TraceType, data)
  const cases: { name: string; event: TraceEvent; title: string; facts: string[]; tone: string; refused?: { host: string; port?: number } }[] = [
    {
      name: 'a refused request, with the proxy’s words on why',
      event: egressEv(1, 'egress_denied', { host: 'registry.example.com', port: 443, method: 'GET', path: '/left-pad', rule: 'host not on the allow-list' }),
      title: 'Refused: GET registry.example.com:443/left-pad — host not on the allow-list',
      facts: [],
      tone: 'warn',
      refused: { host: 'registry.example.com', port: 443 },
    },
    {
      name: 'a refused tunnel, with no method or path',
      event: egressEv(2, 'egress_denied', { host: 'evil.example', port: 22 }),
      title: 'Refused: evil.example:22',
      facts: [],
      tone: 'warn',
      refused: { host: 'evil.example', port: 22 },
    },
    {
      name: 'a host’s summary',
      event: egressEv(3, 'egress', { host: 'registry.npmjs.org', requests: 12, bytes_in: 3565158, bytes_out: 2048 }),
      title: 'registry.npmjs.org: 12 requests, 3.4 MiB in',
      facts: ['2.0 KiB out'],
      tone: 'info',
    },
    {
      name: 'one request',
      event: egressEv(4, 'egress', { host: 'pypi.org', requests: 1, bytes_in: 512, bytes_out: 0 }),
      title: 'pypi.org: 1 request, 512 B in',
      facts: ['0 B out'],
      tone: 'info',
    },
  ]
  for (const c of cases) {
    it(c.name, () => {
      const item = toTimelineItem(c.event)
      expect(item.title).toBe(c.title)
      expect(item.facts).toEqual(c.facts)
      expect(item.tone).toBe(c.tone)
      expect(item.refused).toEqual(c.refused)
    })
  }
})
