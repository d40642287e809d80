/// A feed a `Watcher` runs until it is stopped: the spool folder's (`SpoolFeed`) or a shared
/// queue's (`QueueFeed`). Each runs its own engine and says what happens through one event type.
package protocol WatchFeed: AnyObject, Sendable {
    /// The engine every job of the feed runs on.
    var engine: JobEngine { get }
    /// Where the feed takes its jobs from, for a status line ("the queue db@host as w1").
    var source: String { get }
    /// What a stop ends, for the line a stop signal prints ("no more files are taken").
    var stopNotice: String { get }
    /// The grace a stop gives running jobs unless the caller gives one.
    var grace: Duration { get }
    /// What the feed holds now, for the status line and the metrics.
    var status: WatchStatus { get }

    /// Runs the engine on this feed until `shutdown` and every job handed out has ended.
    func run() async throws

    /// Begins a stop: nothing more is taken; running jobs have `grace` (the feed's by default)
    /// before they are cancelled (the spool) or handed back (the queue). Safe from any thread.
    func shutdown(grace: Duration?)
}

/// What happens to a watcher's feed, for its log, its service manager and its page.
package enum WatchEvent: Sendable {
    /// The feed began: its watcher's id or name, and the files recovered from dead watchers.
    case started(watcher: String, recovered: [String])
    /// The feed takes work from now on.
    case ready(WatchStatus)
    /// Every `heartbeatInterval` while the feed runs (from its main loop, so a stuck loop stops them).
    case heartbeat(WatchStatus)
    /// A spool file was claimed.
    case claimed(name: String)
    /// A spool file went on to done/, failed/ or back to inbox/.
    case finished(SpoolFeed.FileReport)
    /// Every job of a file submitted to the queue ended, the last of them here: how they all
    /// ended on every runner of the fleet (said once per file, by the runner that ended the last).
    case fileEnded(name: String, counts: [JobStatus: Int])
    /// A cancel by key was asked for; whether a running job was cancelled here.
    case cancelRequested(key: String, cancelledRunning: Bool)
    /// Something went wrong that the feed goes on through, in words.
    case problem(String)
    /// Another runner of the fleet ended a job (a queue feed that follows the fleet's ends).
    case fleetFinished(key: String, kind: String, status: String, runner: String)
    /// This watcher fired a schedule's tick (its batch inserted), or dropped missed ticks.
    case scheduleFired(Schedule.Fired)
}

/// How much a watcher holds now, for its status line and metrics.
package enum WatchStatus: Sendable {
    /// The spool's files and jobs.
    case spool(SpoolFeed.Counts)
    /// Jobs running here, from a queue.
    case queue(running: Int)

    /// Jobs running here now.
    package var running: Int {
        switch self {
        case .spool(let counts): counts.running
        case .queue(let running): running
        }
    }
}
