// The live loss curve under a training cell, drawn with uPlot as the VS Code
// extension's panel draws it: the raw loss faded and its bias-corrected EMA
// (the panel's own `comparisonChart`, vscode-extension/src/core/chartData.ts),
// redrawn at most once a frame while steps arrive.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { comparisonChart } from '../../../vscode-extension/src/core/chartData.ts';

const SMOOTHING = 0.6; // the panel's default (mlpl.panel.smoothing)
const MAX_POINTS = 1000;

/** A chart in `host` for one run; `step()` adds a step, `finish()` draws the last frame. */
export function liveLossChart(host) {
  const loops = new Map(); // loop index -> { steps, losses }
  let shown = null;
  let chart = null;
  let scheduled = false;

  function draw() {
    scheduled = false;
    if (!shown) return;
    const c = comparisonChart(shown, [], SMOOTHING, MAX_POINTS);
    const data = [c.x, c.raw, c.smooth];
    host.dataset.points = String(shown.steps.length);
    host.dataset.firstLoss = String(shown.losses[0]);
    host.dataset.lastLoss = String(shown.losses[shown.losses.length - 1]);
    if (chart) {
      chart.setData(data);
      return;
    }
    chart = new uPlot(
      {
        width: Math.max(280, Math.min(560, host.clientWidth || 420)),
        height: 180,
        scales: { x: { time: false } },
        axes: [{ label: 'step' }, { label: 'loss', size: 60 }],
        series: [
          { label: 'step' },
          { label: 'loss', stroke: 'rgba(51, 102, 204, 0.35)', width: 1, spanGaps: true, points: { show: false } },
          { label: `smoothed (${SMOOTHING})`, stroke: '#36c', width: 2, spanGaps: true, points: { show: false } },
        ],
        legend: { show: true },
        cursor: { drag: { x: true, y: false } },
      },
      data,
      host,
    );
  }

  const schedule = () => {
    if (!scheduled) {
      scheduled = true;
      requestAnimationFrame(draw);
    }
  };

  return {
    /** A step of loop `loop` (0-based); the newest loop is the one drawn. */
    step(loop, step, loss) {
      let l = loops.get(loop);
      if (!l) {
        l = { loop, steps: [], losses: [] };
        loops.set(loop, l);
        if (chart) {
          chart.destroy();
          chart = null;
        }
        shown = l;
        host.dataset.loop = String(loop);
      }
      l.steps.push(step);
      l.losses.push(Number.isFinite(loss) ? loss : null);
      schedule();
    },
    finish() {
      draw();
    },
    get steps() {
      return shown ? shown.steps.length : 0;
    },
  };
}
