// Usage over time: tokens per UTC day for the last 30 days, by agent, by
// person or by model, as stacked bars (the five largest groups, the rest as
// one), with a table of the totals that says the same in words. Drawn as
// plain SVG: one chart does not need a charting library.

import { useState } from 'react'
import { api } from './api'
import { ErrorText, Loading, useLoad } from './feedback'
import { formatTokens } from './AdminRuns'
import type { Usage, UsageGroupBy } from './types'

/** Days the chart covers, today included. */
export const usageDays = 30
/** Groups drawn each in their own colour; the others share one. */
const shown = 5
const colours = ['#3a6ea5', '#c0392b', '#27ae60', '#8e44ad', '#d68910', '#7f8c8d']

/** The UTC dates (YYYY-MM-DD) of the n days ending today, oldest first. */
export function lastDays(n: number, now: Date = new Date()): string[] {
  const out: string[] = []
  for (let i = n - 1; i >= 0; i--) {
    out.push(new Date(now.getTime() - i * 86_400_000).toISOString().slice(0, 10))
  }
  return out
}

export interface Series {
  label: string
  total: number
  perDay: number[]
}

/** The chart's series: the largest groups (the answer's order), then the rest summed as one. */
export function series(usage: Usage, days: string[]): Series[] {
  const index = new Map(days.map((d, i) => [d, i]))
  const label = (g: Usage['groups'][number]) => g.name || g.key || (usage.group_by === 'user' ? 'a removed account' : 'removed')
  const out: Series[] = []
  usage.groups.forEach((g, i) => {
    const perDay = days.map(() => 0)
    for (const d of g.days) {
      const at = index.get(d.day)
      if (at !== undefined) perDay[at] += d.tokens.total
    }
    if (i < shown) {
      out.push({ label: label(g), total: g.tokens.total, perDay })
      return
    }
    if (out.length === shown) out.push({ label: 'all others', total: 0, perDay: days.map(() => 0) })
    const rest = out[shown]
    rest.total += g.tokens.total
    perDay.forEach((n, j) => (rest.perDay[j] += n))
  })
  return out
}

function Bars({ data, days }: { data: Series[]; days: string[] }) {
  const width = 600
  const height = 180
  const bar = width / days.length
  const most = Math.max(1, ...days.map((_, j) => data.reduce((n, s) => n + s.perDay[j], 0)))
  return (
    <svg viewBox={`0 0 ${width} ${height + 20}`} className="usage-chart" role="img" aria-label={`Tokens per day over the last ${days.length} days`}>
      {days.map((day, j) => {
        let y = height
        return (
          <g key={day}>
            <title>
              {day}: {formatTokens(data.reduce((n, s) => n + s.perDay[j], 0))} tokens
            </title>
            {data.map((s, k) => {
              const h = (s.perDay[j] / most) * height
              y -= h
              return h > 0 ? <rect key={s.label} x={j * bar + 1} y={y} width={bar - 2} height={h} fill={colours[k]} /> : null
            })}
          </g>
        )
      })}
      <text x={0} y={height + 15} fontSize="11">
        {days[0]}
      </text>
      <text x={width} y={height + 15} fontSize="11" textAnchor="end">
        {days[days.length - 1]}
      </text>
    </svg>
  )
}

export function UsageChart() {
  const [groupBy, setGroupBy] = useState<UsageGroupBy>('agent')
  const days = lastDays(usageDays)
  const usage = useLoad(() => api.usage(groupBy, days[0]), [groupBy, days[0]])
  const data = usage.data ? series(usage.data, days) : []
  return (
    <section aria-labelledby="usage-heading" className="stack">
      <h2 id="usage-heading">Usage</h2>
      <div role="group" aria-label="Group usage by" className="tabs">
        {(['agent', 'user', 'model'] as const).map((g) => (
          <button key={g} type="button" className={g === groupBy ? '' : 'secondary'} aria-pressed={g === groupBy} onClick={() => setGroupBy(g)}>
            By {g === 'user' ? 'person' : g}
          </button>
        ))}
      </div>
      <ErrorText error={usage.error} />
      {usage.loading && !usage.data && <Loading what="the usage" />}
      {usage.data && data.length === 0 && <p className="empty">No tokens were spent in the last {usageDays} days.</p>}
      {usage.data && data.length > 0 && (
        <>
          <Bars data={data} days={days} />
          <table className="list" aria-label={`Tokens by ${groupBy === 'user' ? 'person' : groupBy}, last ${usageDays} days`}>
            <thead>
              <tr>
                <th scope="col">{groupBy === 'user' ? 'Person' : groupBy === 'agent' ? 'Agent' : 'Model'}</th>
                <th scope="col">Tokens</th>
              </tr>
            </thead>
            <tbody>
              {data.map((s, k) => (
                <tr key={s.label}>
                  <th scope="row">
                    <span className="swatch" style={{ background: colours[k] }} aria-hidden="true" /> {s.label}
                  </th>
                  <td>{formatTokens(s.total)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </section>
  )
}
