import Foundation

/// The fleet as `status --queue` shows it: its jobs by state, its watchers, batches and
/// parents, and the hosts it holds back.
package struct QueueStatus: Sendable {
    package struct Running: Sendable {
        package var key: String
        package var runner: String
        package var startedAt: Date
        /// Past its own run: `hooks` (its `--on-finish` hooks run), `completing` (a parent
        /// whose children ended, its record being completed); nil while it runs.
        package var phase: String?
    }
    package struct Failed: Sendable {
        package var key: String
        package var status: String
        package var reason: String?
        package var at: Date
    }
    package var queued: Int
    package var running: [Running]
    /// Jobs that ended in the last `JobQueue.recent` (24 h) by outcome: succeeded or not
    /// modified (`done`), failed (any other status but `notFound` and `cancelled`), and
    /// `notFound` apart, an answer rather than a failure (a list's gone children).
    package var done: Int
    package var failed: Int
    package var cancelled: Int
    package var notFound = 0
    /// The last failures (not `notFound`), newest first.
    package var latestFailed: [Failed]
    /// The watchers heard from in the last hour, by name.
    package var watchers: [QueueWatcher] = []
    /// Queued jobs of kinds no live watcher has loaded, by kind: they wait for one.
    package var unclaimable: [(kind: String, count: Int)] = []
    /// Parents waiting for their children (how many of them ended, of how many), the
    /// oldest 20, and how many wait in all.
    package var parents: [(key: String, ended: Int, total: Int)] = []
    package var waiting = 0
    /// The last 10 batches submitted, newest first.
    package var batches: [(id: String, submittedAt: Date, counts: QueueBatchStatus)] = []
    /// Running jobs whose watcher stopped renewing their lease (claimable again), and jobs
    /// running or waiting again after one did (claimed more than once).
    package var abandoned = 0
    package var reclaimed = 0
    /// Hosts the fleet holds back after a `Retry-After`, and for how long still.
    package var pausedHosts: [(host: String, left: Duration)] = []
}
