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
    /// kept bytes of cut transfers (`.partial-…` and their sidecars) that can no longer be of use:
    /// untouched for `PartialDownload.keptFor` (their key never came back to resume them), or of
    /// a key whose last record is final (succeeded, notModified, notFound) and finished after the
    /// partial was last written. A partial an attempt is writing (locked) stays. The records, the
    /// run logs, other dot-files (locks, temporary files) and files changed less than `minimumAge`
    /// seconds ago stay; links are never followed.
    public func prune(dryRun: Bool, minimumAge: Int = 60) -> Pruned {
        var referenced = Set<String>()
        for name in recordFileNames() {
            if let output = readRecord(fileName: name)?["output"]?.stringValue { referenced.insert(output) }
        }
        var pruned = Pruned()
        let now = Int(time(nil))
        let keptFor = Int(PartialDownload.keptFor.inSeconds)
        // The partials that go, each removed with its sidecar (under the partial's lock).
        var partialsGoing = Set<String>()
        for partial in keptPartials() {
            let old = now - Int(partial.writtenAt / 1000) >= keptFor
            guard old || partialIsOutdated(partial), removeIdlePartial(partial.path, dryRun: true) else { continue }
            partialsGoing.insert(partial.path)
        }
        // Looked at before any is removed: a partial's removal takes its sidecar with it.
        var files: [(path: String, name: String, info: stat)] = []
        forEachPayloadFile { path, name in
            var info = stat()
            guard lstat(root + "/" + path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return }
            files.append((path, name, info))
        }
        for (path, name, info) in files {
            if name.hasPrefix(PartialDownload.prefix) {
                if partialsGoing.contains(path) {
                    guard dryRun || removeIdlePartial(path) else { continue }
                } else if name.hasSuffix(".json"), partialsGoing.contains(String(path.dropLast(5))) {
                    // Listed with its partial, and removed with it (`removeIdlePartial`).
                } else {
                    // A sidecar whose partial is gone, untouched for as long.
                    guard name.hasSuffix(".json"), now - info.st_mtim.wholeSeconds >= keptFor else { continue }
                    var partialInfo = stat()
                    guard lstat(root + "/" + String(path.dropLast(5)), &partialInfo) != 0 else { continue }
                    guard dryRun || unlink(root + "/" + path) == 0 else { continue }
                }
                pruned.files.append(path)
                pruned.bytes += Int(info.st_size)
                continue
            }
            guard !referenced.contains(path) else { continue }
            if now - info.st_mtim.wholeSeconds < minimumAge {
                pruned.young += 1
                continue
            }
            if dryRun || unlink(root + "/" + path) == 0 {
                pruned.files.append(path)
                pruned.bytes += Int(info.st_size)
            }
        }
        pruned.files.sort()
        return pruned
    }

    /// Calls `visit` with the relative path and name of every entry in the output directory's
    /// payload folders that is not a folder: all but `results/` and `runs/`, and no dot-file but a
    /// cut transfer's kept bytes and sidecar (`.partial-…`). Folders are descended into when their
    /// directory entry says so (or, where the file system does not say, `lstat` does): never
    /// through a link.
    func forEachPayloadFile(_ visit: (_ path: String, _ name: String) -> Void) {
        func walk(_ relative: String) {
            var folders: [String] = []
            FolderReader.forEachEntry(in: relative.isEmpty ? root : root + "/" + relative) { entry in
                guard let name = entry.name, !name.hasPrefix(".") || name.hasPrefix(PartialDownload.prefix) else { return }
                if relative.isEmpty && (name == "results" || name == "runs") { return }
                let path = relative.isEmpty ? name : relative + "/" + name
                var info = stat()
                if entry.isDirectory
                    || (entry.type == UInt8(DT_UNKNOWN) && lstat(root + "/" + path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR)
                {
                    folders.append(path)
                } else {
                    visit(path, name)
                }
            }
            for folder in folders { walk(folder) }
        }
        walk("")
    }
}
