import Foundation

extension Spool {
    /// Whether the spool's folders are there (`submit` and `watch` make them; `cancel` and
    /// `status` only read).
    package var exists: Bool { FileSystem.entry(inbox)?.type == .directory }

    /// The job files waiting in inbox/ or claimed in active/ that hold a job with `key` (keys a
    /// file does not name are derived as when it runs; a file that does not read is passed over).
    package func filesHolding(key: String, registry: KindRegistry) -> [String] {
        var folders = [inbox]
        for name in FileSystem.names(in: active).sorted() where !name.hasPrefix(".") {
            if FileSystem.entry("\(active)/\(name)")?.type == .directory { folders.append("\(active)/\(name)") }
        }
        var holding: [String] = []
        for folder in folders {
            for name in FileSystem.names(in: folder).sorted() where Spool.isCandidate(name) {
                let path = "\(folder)/\(name)"
                guard FileSystem.entry(path)?.type == .regular else { continue }
                let reader = JobFileReader(path: path, registry: registry, checkingSecrets: false)
                while let element = reader.next() {
                    if case .success(let job) = element, job.key == key {
                        holding.append(name)
                        break
                    }
                }
            }
        }
        return holding
    }

    /// The watchers' processes running a task of `key` now (its lock is held).
    package func running(key: String) -> [Int] {
        SpoolKeyLock(spool: self).held().filter { $0.key == key }.map(\.pid)
    }
}
