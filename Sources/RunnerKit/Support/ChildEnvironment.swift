import Foundation
import Synchronization

/// The environment the runner hands the programs it starts for jobs: `--on-finish` hooks and
/// executable kinds.
///
/// Those programs act for whoever wrote the job, who is trusted less than the operator, so they
/// get the runner's environment without its own secrets: no `PGPASSWORD`, `PGPASSFILE` or
/// `RUNNER_QUEUE`, and no variable whose value holds one of theirs, the queue's URL or the page's
/// token, whatever the watcher was started with. The command line withholds those values as it reads
/// them (`withhold(_:)`).
package enum ChildEnvironment {
    /// Variables never passed on.
    package static let withheldNames: Set<String> = ["PGPASSWORD", "PGPASSFILE", "RUNNER_QUEUE"]

    private static let withheldValues = Mutex<Set<String>>([])

    /// Withholds every variable whose value contains `secret` (an empty one is ignored).
    package static func withhold(_ secret: String) {
        guard !secret.isEmpty else { return }
        _ = withheldValues.withLock { $0.insert(secret) }
    }

    /// The runner's environment without what is withheld, with `adding` over it.
    package static func make(adding: [String: String] = [:], from base: [String: String] = ProcessInfo.processInfo.environment) -> [String: String] {
        // The values of the withheld variables are secrets too, wherever else they were copied.
        // A secret of 8 characters or more is looked for inside every value; a shorter one (a
        // weak password) only as a whole value, so that it cannot take PATH or HOME with it.
        let secrets = withheldValues.withLock { $0 }.union(withheldNames.compactMap { base[$0] }.filter { !$0.isEmpty })
        let (long, short) = (secrets.filter { $0.count >= 8 }, secrets.filter { $0.count < 8 })
        var environment = base.filter { name, value in
            !withheldNames.contains(name) && !short.contains(value) && !long.contains { value.contains($0) }
        }
        environment.merge(adding) { $1 }
        return environment
    }
}
