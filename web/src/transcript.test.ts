import { describe, expect, it } from 'vitest'
import { toTimeline } from './timeline'
import { maxStepText, printedLines, toolStep, transcriptStep, unwrapShell } from './transcript'
import type { TraceEvent, TraceType } from './types'

// The transcript events below are what internal/driver's parsers make of
// the real CLIs' recorded output (internal/driver/testdata/*.stdout.jsonl),
// as the runner records them; the CLI command's start and end are the
// runner's (internal/runner/cli.go).

let seq = 0
function ev(type: TraceType, data: Record<string, unknown>): TraceEvent {
  seq++
  return { seq, at: '2026-12-01T14:20:12Z', type, data, hash: '', prev_hash: '' }
}
const t = (data: Record<string, unknown>) => ev('transcript', data)

/** A CLI run's trace: started, the CLI's command, its steps, its end, the run's end. */
function cliRun(driver: string, steps: Record<string, unknown>[], end: { exit: number; output: string; status: string; reason: string }): TraceEvent[] {
  seq = 0
  return [
    ev('admitted', { prompt_bytes: 20 }),
    ev('started', { driver, model: 'test-model', fs: 'read-write', changes: 'review' }),
    ev('tool_call', { id: 'cli-1', name: driver, command: 'cli-1' }),
    ...steps.map(t),
    ev('tool_result', { id: 'cli-1', name: driver, exit_code: end.exit, violation: '', output: end.output }),
    ev('ended', { status: end.status, reason: end.reason }),
  ]
}

type Row = { title: string; tone: string; detail?: string; facts?: string[]; fold?: string; markdown?: string }

function rows(events: TraceEvent[]): Row[] {
  return toTimeline(events)
    .filter((i) => !['admitted', 'started'].includes(i.type))
    .map((i) => {
      const r: Row = { title: i.title, tone: i.tone }
      if (i.detail !== undefined) r.detail = i.detail
      if (i.facts.length > 0) r.facts = i.facts
      if (i.fold) r.fold = `${i.fold.summary}: ${i.fold.text}`
      if (i.markdown !== undefined) r.markdown = i.markdown
      return r
    })
}

const codexWarning = 'Model metadata for `test-model` not found. Defaulting to fallback metadata; this can degrade performance and cause issues.'

describe('a CLI run’s timeline, from the recorded CLIs', () => {
  const cases: { name: string; events: TraceEvent[]; want: Row[] }[] = [
    {
      name: 'Codex, completed: its metadata warning is a warning, the command one step',
      events: cliRun(
        'codex',
        [
          { kind: 'error', id: 'item_0', text: codexWarning },
          { kind: 'tool_call', id: 'item_1', name: 'command', args: `{"command":"/bin/bash -lc 'echo hi > made-by-codex.txt'"}` },
          { kind: 'tool_result', id: 'item_1', name: 'command' },
          { kind: 'message', id: 'item_2', text: 'done' },
          { kind: 'model', input_tokens: 20, output_tokens: 6 },
        ],
        {
          exit: 0,
          output: [
            'WARNING: proceeding, even though we could not create PATH aliases',
            '{"type":"thread.started","thread_id":"01a231fa"}',
            '{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"done"}}',
            'Reading additional input from stdin...{"type":"turn.completed","usage":{"input_tokens":20,"output_tokens":6}}',
          ].join('\n'),
          status: 'completed',
          reason: 'the codex CLI finished',
        },
      ),
      want: [
        { title: 'Codex CLI started', tone: 'tool' },
        { title: 'CLI warning', tone: 'warn', detail: codexWarning },
        { title: 'Ran a command', tone: 'tool', detail: '$ echo hi > made-by-codex.txt', facts: ['succeeded'] },
        { title: 'Message', tone: 'model', markdown: 'done' },
        { title: 'Model turn', tone: 'info', facts: ['20 in, 6 out tokens, as the CLI counted'] },
        {
          title: 'Codex CLI finished',
          tone: 'output',
          facts: ['exit 0'],
          fold: 'Warnings it printed (2 lines): WARNING: proceeding, even though we could not create PATH aliases\nReading additional input from stdin...',
        },
        { title: 'Ended: completed', tone: 'good', detail: 'the codex CLI finished' },
      ],
    },
    {
      name: 'Codex, failed: the last error is why, the warning before it stays a warning',
      events: cliRun(
        'codex',
        [
          { kind: 'error', id: 'item_0', text: codexWarning },
          { kind: 'error', text: "the agent's token budget is spent" },
          { kind: 'error', text: "the agent's token budget is spent" },
        ],
        { exit: 1, output: '{"type":"turn.failed","error":{"message":"x"}}', status: 'errored', reason: 'the codex CLI exited with status 1' },
      ),
      want: [
        { title: 'Codex CLI started', tone: 'tool' },
        { title: 'CLI warning', tone: 'warn', detail: codexWarning },
        { title: 'CLI warning', tone: 'warn', detail: "the agent's token budget is spent" },
        { title: 'CLI error', tone: 'bad', detail: "the agent's token budget is spent" },
        { title: 'Codex CLI failed', tone: 'bad', facts: ['exit 1'] },
        { title: 'Ended: errored', tone: 'bad', detail: 'the codex CLI exited with status 1' },
      ],
    },
    {
      name: 'Claude Code, completed: the Bash call folds its result, arrived after a model turn',
      events: cliRun(
        'claude-code',
        [
          { kind: 'tool_call', id: 'toolu_1', name: 'Bash', args: '{"command":"echo hi > made-by-claude.txt","description":"Write a file"}' },
          { kind: 'model', input_tokens: 10 },
          { kind: 'tool_result', id: 'toolu_1', name: 'Bash', text: '(Bash completed with no output)' },
          { kind: 'message', text: 'done' },
          { kind: 'model', input_tokens: 10 },
        ],
        { exit: 0, output: '{"type":"result","subtype":"success","result":"done"}', status: 'completed', reason: 'the claude-code CLI finished' },
      ),
      want: [
        { title: 'Claude Code started', tone: 'tool' },
        {
          title: 'Ran a command: Write a file',
          tone: 'tool',
          detail: '$ echo hi > made-by-claude.txt',
          facts: ['succeeded'],
          fold: 'Output (1 line): (Bash completed with no output)',
        },
        { title: 'Model turn', tone: 'info', facts: ['10 in, 0 out tokens, as the CLI counted'] },
        { title: 'Message', tone: 'model', markdown: 'done' },
        { title: 'Model turn', tone: 'info', facts: ['10 in, 0 out tokens, as the CLI counted'] },
        { title: 'Claude Code finished', tone: 'output', facts: ['exit 0'] },
        { title: 'Ended: completed', tone: 'good', detail: 'the claude-code CLI finished' },
      ],
    },
    {
      name: 'Claude Code, failed: its error is why',
      events: cliRun(
        'claude-code',
        [
          { kind: 'message', text: "API Error: 400 the agent's token budget is spent" },
          { kind: 'model' },
          { kind: 'error', text: "API Error: 400 the agent's token budget is spent" },
        ],
        { exit: 1, output: '', status: 'errored', reason: 'the claude-code CLI exited with status 1' },
      ),
      want: [
        { title: 'Claude Code started', tone: 'tool' },
        { title: 'Message', tone: 'model', markdown: "API Error: 400 the agent's token budget is spent" },
        { title: 'Model turn', tone: 'info' },
        { title: 'CLI error', tone: 'bad', detail: "API Error: 400 the agent's token budget is spent" },
        { title: 'Claude Code failed', tone: 'bad', facts: ['exit 1'] },
        { title: 'Ended: errored', tone: 'bad', detail: 'the claude-code CLI exited with status 1' },
      ],
    },
    {
      name: 'OpenCode, completed: a grep and a bash, each one step',
      events: cliRun(
        'opencode',
        [
          { kind: 'tool_call', id: 'call_2', name: 'grep', args: '{"pattern":"no-such-text"}' },
          { kind: 'tool_result', id: 'call_2', name: 'grep', text: 'No files found' },
          { kind: 'tool_call', id: 'call_1', name: 'bash', args: '{"command":"echo hi > made-by-opencode.txt","description":"Write a file"}' },
          { kind: 'tool_result', id: 'call_1', name: 'bash', text: '(no output)' },
          { kind: 'model', text: 'tool-calls', input_tokens: 10, output_tokens: 3 },
          { kind: 'message', id: 'msg_231fa5bab0013StspPk5aW67xV', text: 'done' },
          { kind: 'model', text: 'stop', input_tokens: 10, output_tokens: 3 },
        ],
        { exit: 0, output: '', status: 'completed', reason: 'the opencode CLI finished' },
      ),
      want: [
        { title: 'OpenCode started', tone: 'tool' },
        { title: 'Searched for no-such-text', tone: 'tool', facts: ['done'], fold: 'Found (1 line): No files found' },
        { title: 'Ran a command: Write a file', tone: 'tool', detail: '$ echo hi > made-by-opencode.txt', facts: ['succeeded'], fold: 'Output (1 line): (no output)' },
        { title: 'Model turn', tone: 'info', facts: ['10 in, 3 out tokens, as the CLI counted'] },
        { title: 'Message', tone: 'model', markdown: 'done' },
        { title: 'Model turn', tone: 'info', facts: ['10 in, 3 out tokens, as the CLI counted'] },
        { title: 'OpenCode finished', tone: 'output', facts: ['exit 0'] },
        { title: 'Ended: completed', tone: 'good', detail: 'the opencode CLI finished' },
      ],
    },
    {
      name: 'OpenCode, failed: its one error is why',
      events: cliRun('opencode', [{ kind: 'error', text: "APIError: the agent's token budget is spent" }], {
        exit: 1,
        output: 'Error: APIError\n{"type":"error","error":{"name":"APIError"}}',
        status: 'errored',
        reason: 'the opencode CLI exited with status 1',
      }),
      want: [
        { title: 'OpenCode started', tone: 'tool' },
        { title: 'CLI error', tone: 'bad', detail: "APIError: the agent's token budget is spent" },
        { title: 'OpenCode failed', tone: 'bad', facts: ['exit 1'], fold: 'What it printed (1 line): Error: APIError' },
        { title: 'Ended: errored', tone: 'bad', detail: 'the opencode CLI exited with status 1' },
      ],
    },
    {
      name: 'a run still going: a call waits for its result, errors are warnings',
      events: (() => {
        const all = cliRun(
          'codex',
          [
            { kind: 'error', text: 'stream error: retrying' },
            { kind: 'tool_call', id: 'item_1', name: 'command', args: '{"command":"go test ./..."}' },
          ],
          { exit: 0, output: '', status: 'completed', reason: '' },
        )
        return all.slice(0, -2)
      })(),
      want: [
        { title: 'Codex CLI started', tone: 'tool' },
        { title: 'CLI warning', tone: 'warn', detail: 'stream error: retrying' },
        { title: 'Ran a command', tone: 'tool', detail: '$ go test ./...' },
      ],
    },
    {
      name: 'a resumed CLI starts its ids again: a result folds into its own start’s call',
      events: (() => {
        seq = 0
        return [
          ev('tool_call', { id: 'cli-1', name: 'codex', command: 'cli-1' }),
          t({ kind: 'tool_call', id: 'item_1', name: 'command', args: '{"command":"ls"}' }),
          ev('tool_result', { id: 'cli-1', name: 'codex', exit_code: 0, violation: '', output: '' }),
          ev('tool_call', { id: 'cli-2', name: 'codex', command: 'cli-2' }),
          t({ kind: 'tool_call', id: 'item_1', name: 'command', args: '{"command":"pwd"}' }),
          t({ kind: 'tool_result', id: 'item_1', name: 'command', text: '/workspace\n' }),
        ]
      })(),
      want: [
        { title: 'Codex CLI started', tone: 'tool' },
        { title: 'Ran a command', tone: 'tool', detail: '$ ls' },
        { title: 'Codex CLI finished', tone: 'output', facts: ['exit 0'] },
        { title: 'Codex CLI started', tone: 'tool' },
        { title: 'Ran a command', tone: 'tool', detail: '$ pwd', facts: ['succeeded'], fold: 'Output (1 line): /workspace\n' },
      ],
    },
  ]
  for (const c of cases) {
    it(c.name, () => expect(rows(c.events)).toEqual(c.want))
  }
})

describe('toolStep', () => {
  const cases: { name: string; call: Record<string, unknown>; result?: Record<string, unknown>; title: string; detail?: string; fold?: string; facts: string[]; tone: string }[] = [
    {
      name: 'a Codex command that failed, with its output',
      call: { kind: 'tool_call', id: 'item_2', name: 'command', args: '{"command":"false"}' },
      result: { kind: 'tool_result', id: 'item_2', name: 'command', text: 'boom\n', is_error: true },
      title: 'Ran a command',
      detail: '$ false',
      fold: 'Output (1 line)',
      facts: ['failed'],
      tone: 'warn',
    },
    {
      name: 'a Codex apply_patch: the files it changed, relative to the workspace',
      call: { kind: 'tool_call', id: 'item_1', name: 'file_change', args: '[{"path":"/workspace/p.txt","kind":"add"},{"path":"/workspace/src/a.go","kind":"update"}]' },
      result: { kind: 'tool_result', id: 'item_1', name: 'file_change', text: 'completed' },
      title: 'Edited 2 files',
      detail: 'added p.txt\nchanged src/a.go',
      facts: ['done'],
      tone: 'tool',
    },
    {
      name: 'a Claude Code Edit: the change folded',
      call: { kind: 'tool_call', id: 't1', name: 'Edit', args: '{"file_path":"/workspace/a.go","old_string":"x := 1","new_string":"x := 2"}' },
      result: { kind: 'tool_result', id: 't1', name: 'Edit', text: 'The file has been updated.' },
      title: 'Edited a.go',
      fold: 'The change',
      facts: ['done'],
      tone: 'tool',
    },
    {
      name: 'a Claude Code Write: the new content folded',
      call: { kind: 'tool_call', id: 't2', name: 'Write', args: '{"file_path":"/workspace/notes.md","content":"# Notes\\nmore\\n"}' },
      title: 'Wrote notes.md',
      fold: 'New content (2 lines)',
      facts: [],
      tone: 'tool',
    },
    {
      name: 'an OpenCode edit refused: why it failed, folded',
      call: { kind: 'tool_call', id: 'd', name: 'edit', args: '{"filePath":"/workspace/x","oldString":"a","newString":"b"}' },
      result: { kind: 'tool_result', id: 'd', name: 'edit', text: 'permission denied', is_error: true },
      title: 'Edited x',
      fold: 'Why it failed (1 line)',
      facts: ['failed'],
      tone: 'warn',
    },
    {
      name: 'a Claude Code Read',
      call: { kind: 'tool_call', id: 't3', name: 'Read', args: '{"file_path":"/workspace/go.mod"}' },
      result: { kind: 'tool_result', id: 't3', name: 'Read', text: 'module corral\n\ngo 1.25\n' },
      title: 'Read go.mod',
      fold: 'What it read (3 lines)',
      facts: ['done'],
      tone: 'tool',
    },
    {
      name: 'Corral’s delegate through MCP: named, with its arguments',
      call: { kind: 'tool_call', id: 'item_5', name: 'corral.delegate', args: '{"agent_id":"agt_2","task":"lint"}' },
      result: { kind: 'tool_result', id: 'item_5', name: 'corral.delegate', text: '{"status":"completed"}' },
      title: 'Used corral.delegate',
      detail: '{\n  "agent_id": "agt_2",\n  "task": "lint"\n}',
      fold: 'Result (1 line)',
      facts: ['done'],
      tone: 'tool',
    },
    {
      name: 'arguments cut by the server are shown as they are',
      call: { kind: 'tool_call', name: 'file_change', args: '[{"path":"a.go"', truncated: true },
      title: 'Edited files',
      detail: '[{"path":"a.go"',
      facts: ['cut'],
      tone: 'tool',
    },
    {
      name: 'an unknown Codex item type, by its name alone',
      call: { kind: 'tool_call', id: 'item_9', name: 'image_view' },
      title: 'Used image_view',
      facts: [],
      tone: 'tool',
    },
  ]
  for (const c of cases) {
    it(c.name, () => {
      const s = toolStep(c.call, c.result)
      expect(s.title).toBe(c.title)
      expect(s.detail).toBe(c.detail)
      expect(s.fold?.summary).toBe(c.fold)
      expect(s.facts).toEqual(c.facts)
      expect(s.tone).toBe(c.tone)
    })
  }
})

describe('transcriptStep', () => {
  it('reads an error as a warning, or as the error when the CLI failed of it', () => {
    expect(transcriptStep({ kind: 'error', text: 'x' })).toMatchObject({ title: 'CLI warning', tone: 'warn' })
    expect(transcriptStep({ kind: 'error', text: 'x' }, true)).toMatchObject({ title: 'CLI error', tone: 'bad' })
  })
  it('folds reasoning', () => {
    expect(transcriptStep({ kind: 'reasoning', text: 'Look at the tests first.' })).toMatchObject({
      title: 'Thinking',
      fold: { summary: 'What it thought (1 line)', text: 'Look at the tests first.' },
    })
  })
  it('shows a result whose call is not in the trace by itself', () => {
    expect(transcriptStep({ kind: 'tool_result', id: 't', text: 'Exit code 1', is_error: true })).toMatchObject({
      title: 'Result of a tool',
      facts: ['failed'],
      tone: 'warn',
    })
  })
  it('says the transcript was cut', () => {
    expect(transcriptStep({ kind: 'truncated', note: "the CLI's further steps are left out of the trace" })).toMatchObject({
      title: 'Transcript cut',
      tone: 'warn',
    })
  })
  it('names a kind it does not know', () => {
    expect(transcriptStep({ kind: 'plan', name: 'todo', text: 'step one' })).toMatchObject({ title: 'CLI plan: todo', detail: 'step one', tone: 'info' })
  })
  it('bounds a step’s text, saying how much is left out', () => {
    const s = transcriptStep({ kind: 'message', text: 'x'.repeat(maxStepText + 10) })
    expect(s.markdown).toBe(`${'x'.repeat(maxStepText)}\n… (10 more characters)`)
    expect(transcriptStep({ kind: 'message', text: 'y'.repeat(maxStepText) }).markdown).toBe('y'.repeat(maxStepText))
  })
})

describe('unwrapShell', () => {
  const cases: [string, string][] = [
    ["/bin/bash -lc 'echo hi > made-by-codex.txt'", 'echo hi > made-by-codex.txt'],
    ["bash -lc 'go test ./...'", 'go test ./...'],
    ["/bin/sh -c 'printf '\\''%s'\\'' x'", "printf '%s' x"],
    ['go test ./...', 'go test ./...'],
    ["/bin/bash -lc 'a' 'b'", "/bin/bash -lc 'a' 'b'"],
  ]
  for (const [cmd, want] of cases) it(`unwrapShell(${JSON.stringify(cmd)})`, () => expect(unwrapShell(cmd)).toBe(want))
})

describe('printedLines', () => {
  const cases: [string, string, string[]][] = [
    ['only events', '{"type":"a"}\n{"type":"b"}\n', []],
    ['a warning between events', 'WARNING: x\n{"type":"a"}', ['WARNING: x']],
    ['a warning run into an event', 'Reading additional input from stdin...{"type":"turn.started"}', ['Reading additional input from stdin...']],
    ['an event cut at the tail’s start', 'put_tokens":20,"output_tokens":6}}\nwarning: y', ['warning: y']],
    ['blank lines', '\n  \nerror: z\n', ['error: z']],
  ]
  for (const [name, out, want] of cases) it(name, () => expect(printedLines(out)).toEqual(want))
})
