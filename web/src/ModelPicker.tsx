// The agent's model: a select of the models the gateway's provider lists
// (the server's default first and marked), "Other…" for any name the list
// does not hold, and a plain text box when the server cannot be asked.

import { useState } from 'react'
import { Field } from './Field'
import type { ModelList } from './types'

/** The select's value for "Other…": no model name holds a control character. */
export const otherModel = '\u0001other'

export function ModelPicker({ value, onChange, models }: { value: string; onChange: (v: string) => void; models: ModelList | undefined }) {
  const names = models?.models.map((m) => m.id) ?? []
  const [other, setOther] = useState(() => value !== '' && !names.includes(value))
  if (!models) {
    return (
      <Field label="Model" hint="Leave empty for the server’s default model.">
        {(p) => <input {...p} value={value} placeholder="the server’s default model" onChange={(e) => onChange(e.target.value)} />}
      </Field>
    )
  }
  const def = models.default
  // A value the list does not hold is kept, under "Other…".
  const shown = other || (value !== '' && !names.includes(value)) ? otherModel : value
  const hint = !models.configured ? (
    <span className="warn-text">No model provider is configured on this server: messages are refused until an administrator sets one.</span>
  ) : models.listed ? (
    'The models the server’s model provider lists; “Other…” takes any other name it serves.'
  ) : (
    'The model provider does not list its models: only the server’s default is offered; “Other…” takes any name it serves.'
  )
  return (
    <>
      <Field label="Model" hint={hint}>
        {(p) => (
          <select
            {...p}
            value={shown}
            onChange={(e) => {
              const v = e.target.value
              setOther(v === otherModel)
              if (v !== otherModel) onChange(v)
            }}
          >
            <option value="">{def ? `Server default (${def})` : 'Server default'}</option>
            {names.map((n) => (
              <option key={n} value={n}>
                {n === def ? `${n} (the default)` : n}
              </option>
            ))}
            <option value={otherModel}>Other…</option>
          </select>
        )}
      </Field>
      {shown === otherModel && (
        <Field label="Model name" hint="As the provider names it.">
          {(p) => <input {...p} value={value} onChange={(e) => onChange(e.target.value)} />}
        </Field>
      )}
    </>
  )
}
