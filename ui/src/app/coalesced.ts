/**
 * One load at a time. A request while a load runs asks for one more after it (the latest
 * state is what counts), never a second in parallel: a burst of changes from the core (a
 * first scan of the agents' logs writes thousands) becomes at most two loads.
 */
export class Coalesced {
  private running: Promise<void> | null = null;
  private again = false;
  private readonly load: () => Promise<void>;

  constructor(load: () => Promise<void>) {
    this.load = load;
  }

  /** Loads now, or once more after the load under way; resolves when the data is current. */
  request(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          await this.load();
        } while (this.again);
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }
}

/**
 * A board's loads: at once while it is shown, else once it is shown again. A board the
 * person is not looking at costs nothing when the core reports changes; the one on screen
 * stays live.
 */
export class LoadWhenShown {
  private shown = false;
  private stale = true;
  private readonly loads: Coalesced;

  constructor(load: () => Promise<void>) {
    this.loads = new Coalesced(async () => {
      this.stale = false;
      await load();
    });
  }

  get visible(): boolean {
    return this.shown;
  }

  /** The board is on screen: load it if something changed since it last loaded. */
  show(): Promise<void> {
    this.shown = true;
    return this.stale ? this.loads.request() : Promise.resolve();
  }

  hide(): void {
    this.shown = false;
  }

  /** Its data changed: load now if shown, else when shown. */
  changed(): Promise<void> {
    this.stale = true;
    return this.shown ? this.loads.request() : Promise.resolve();
  }

  /** Load now, shown or not. */
  load(): Promise<void> {
    return this.loads.request();
  }
}

/**
 * A board's view model, loaded with [`LoadWhenShown`]: `show`, `hide` and `load` are its
 * loads'; a board says only how it fetches.
 */
export abstract class ShownBoard {
  protected readonly loads = new LoadWhenShown(() => this.fetch());

  protected abstract fetch(): Promise<void>;

  show(): Promise<void> {
    return this.loads.show();
  }

  hide(): void {
    this.loads.hide();
  }

  load(): Promise<void> {
    return this.loads.load();
  }
}
