// Slots: how many calls of a kind may run at once, the rest waiting in line.
import { Observable, type Subscription } from 'rxjs';

/** A limited number of slots: work waits in line for one, and gives it back when it ends or is cancelled. */
export class Slots {
  private readonly waiting: Array<() => void> = [];

  constructor(private free: number) {}

  /** Whether work given now would wait for a slot. */
  get full(): boolean {
    return this.free === 0;
  }

  run<T>(work: Observable<T>): Observable<T> {
    return new Observable<T>((subscriber) => {
      let inner: Subscription | undefined;
      let holding = false;
      const start = () => {
        holding = true;
        inner = work.subscribe(subscriber);
      };
      if (this.free > 0) {
        this.free -= 1;
        start();
      } else {
        this.waiting.push(start);
      }
      return () => {
        const queued = this.waiting.indexOf(start);
        if (queued >= 0) this.waiting.splice(queued, 1);
        inner?.unsubscribe();
        if (holding) this.release();
      };
    });
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free += 1;
  }
}
