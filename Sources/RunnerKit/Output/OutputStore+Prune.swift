import Glibc

extension OutputStore {
    /// What `prune` found: payloads no record points to, and their size.
    public struct Pruned: Sendable {
        /// Relative paths, sorted.
        public var files: [String] = []
        public var bytes = 0
        /// Unreferenced files left alone because they were written moments ago (a watcher's
        /// payload whose record is on its way).
        public var young = 0
    }

    /// Removes (with `dryRun`, only lists) the payloads that no record in `results/` points to:
    /// those of keys that became 404, of outputs renamed, of records forgotten by hand; and the
    /// kept bytes of cut transfers (`.partial-…` and their sidecars) untouched for
    /// `PartialDownload.keptFor`, whose key never came back to resume them. The records, the run
    /// logs, other dot-files (locks, temporary files) and files changed less than `minimumAge`
    /// seconds ago stay; links are never followed.
    public func prune(dryRun: Bool, minimumAge: Int = 60) -> Pruned {
        var referenced = Set<String>()
        for name in recordFileNames() {
            if let output = readRecord(fileName: name)?["output"]?.stringValue { referenced.insert(output) }
        }
        var pruned = Pruned()
        let now = Int(time(nil))
        func walk(_ relative: String) {
            let folder = relative.isEmpty ? root : root + "/" + relative
            var names: [(name: String, directory: Bool)] = []
            FolderReader.forEachEntry(in: folder) { entry in
                guard let name = entry.name, !name.hasPrefix(".") || name.hasPrefix(PartialDownload.prefix) else { return }
                if relative.isEmpty && (name == "results" || name == "runs") { return }
                names.append((name, entry.isDirectory))
            }
            for (name, _) in names {
                let path = relative.isEmpty ? name : relative + "/" + name
                var info = stat()
                guard lstat(root + "/" + path, &info) == 0 else { continue }
                switch info.st_mode & S_IFMT {
                case S_IFDIR:
                    walk(path)
                case S_IFREG where name.hasPrefix(PartialDownload.prefix):
                    guard now - info.st_mtim.wholeSeconds >= Int(PartialDownload.keptFor.inSeconds) else { continue }
                    if dryRun || unlink(root + "/" + path) == 0 {
                        pruned.files.append(path)
                        pruned.bytes += Int(info.st_size)
                    }
                case S_IFREG where !referenced.contains(path):
                    if now - info.st_mtim.wholeSeconds < minimumAge {
                        pruned.young += 1
                        continue
                    }
                    if dryRun || unlink(root + "/" + path) == 0 {
                        pruned.files.append(path)
                        pruned.bytes += Int(info.st_size)
                    }
                default:
                    continue
                }
            }
        }
        walk("")
        pruned.files.sort()
        return pruned
    }
}
