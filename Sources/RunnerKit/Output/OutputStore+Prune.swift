import Glibc

extension OutputStore {
    /// What `prune` found: payloads no record points to, and their size.
    package struct Pruned: Sendable {
        /// Relative paths, sorted.
        package var files: [String] = []
        /// The size of each file in `files`, by its path.
        package var sizes: [String: Int] = [:]
        package var bytes = 0
        /// Unreferenced files left alone because they were written moments ago (a watcher's
        /// payload whose record is on its way).
        package var young = 0
    }

    /// Removes (with `dryRun`, only lists) the payloads that no record in `results/` points to:
    /// those of keys that became 404, of outputs renamed, of records forgotten by hand; and the
    /// kept bytes of cut transfers (`.partial-…` and their sidecars) that can no longer be of use:
    /// untouched for `PartialDownload.keptFor` (their key never came back to resume them), or of
    /// a key whose last record is final (succeeded, notModified, notFound) and finished after the
    /// partial was last written. A partial an attempt is writing (locked) stays. The records, the
    /// run logs, other dot-files (locks, temporary files) and files changed less than `minimumAge`
    /// seconds ago stay; links are never followed.
    ///
    /// A key's last good payload always stays (see `keptPayloads()`), whatever its last job did.
    package func prune(dryRun: Bool, minimumAge: Int = 60) -> Pruned {
        prune(dryRun: dryRun, minimumAge: minimumAge, afterListing: nil)
    }

    /// `prune`, calling `afterListing` with each folder's relative path once its entries are
    /// listed and before any of them is removed (where a test changes the folder under it).
    func prune(dryRun: Bool, minimumAge: Int, afterListing: ((_ folder: String) -> Void)?) -> Pruned {
        let referenced = keptPayloads()
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
        forEachPayloadFolder(afterListing: afterListing) { folder in
            // Looked at before any is removed: a partial's removal takes its sidecar with it.
            let files = folder.files.compactMap { name -> (name: String, info: stat)? in
                var info = stat()
                guard fstatat(folder.fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
                return (name, info)
            }
            for (name, info) in files {
                let path = folder.path(of: name)
                if name.hasPrefix(PartialDownload.prefix) {
                    if partialsGoing.contains(path) {
                        guard dryRun || removeIdlePartial(in: folder.fd, name: name) else { continue }
                    } else if name.hasSuffix(".json"), partialsGoing.contains(String(path.dropLast(5))) {
                        // Listed with its partial (looked at above, before either was removed),
                        // and removed with it (`removeIdlePartial`).
                    } else {
                        // A sidecar whose partial is gone, untouched for as long.
                        guard name.hasSuffix(".json"), now - info.st_mtim.wholeSeconds >= keptFor else { continue }
                        var partialInfo = stat()
                        guard fstatat(folder.fd, String(name.dropLast(5)), &partialInfo, AT_SYMLINK_NOFOLLOW) != 0 else { continue }
                        guard dryRun || unlinkat(folder.fd, name, 0) == 0 else { continue }
                    }
                    pruned.files.append(path)
                    pruned.sizes[path] = Int(info.st_size)
                    pruned.bytes += Int(info.st_size)
                    continue
                }
                guard !referenced.contains(path) else { continue }
                if now - info.st_mtim.wholeSeconds < minimumAge {
                    pruned.young += 1
                    continue
                }
                if dryRun || unlinkat(folder.fd, name, 0) == 0 {
                    pruned.files.append(path)
                    pruned.sizes[path] = Int(info.st_size)
                    pruned.bytes += Int(info.st_size)
                }
            }
        }
        pruned.files.sort()
        return pruned
    }

    /// The payloads `prune` keeps, by relative path: every `output` a record in `results/` names
    /// (a stale record names the key's last good payload); and, for a key whose record names none
    /// although its job ended in a way that never gives a payload up (`cancelled`, `failed`,
    /// `timedOut`, `offline`: only a runner from before every such end pointed at the last good
    /// payload wrote such a record), every `output` a good line of that key in the run logs
    /// (`succeeded`, `notModified`, or stale) names. Only a 404 without `keepStale`, a renamed
    /// `output` or a record removed by hand leave a payload for `prune`.
    func keptPayloads() -> Set<String> {
        var kept = Set<String>()
        var lost = Set<String>()
        for name in recordFileNames() {
            guard let record = readRecord(fileName: name) else { continue }
            if let output = record["output"]?.stringValue {
                kept.insert(output)
            } else if let key = record["key"]?.stringValue,
                record["status"]?.stringValue.flatMap(JobStatus.init(rawValue:))?.allowsStaleFallback == true
            {
                lost.insert(key)
            }
        }
        if !lost.isEmpty { kept.formUnion(goodOutputsInRunLogs(of: lost)) }
        return kept
    }

    /// Every `output` that a good line (`succeeded`, `notModified`, or stale) of one of `keys`
    /// names in the run logs, each read through the descriptor of `runs/`, never through a link.
    private func goodOutputsInRunLogs(of keys: Set<String>) -> Set<String> {
        var outputs = Set<String>()
        let runs = openat(rootFolder.fd, "runs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard runs >= 0 else { return outputs }
        defer { close(runs) }
        var logs: [String] = []
        FolderReader.forEachEntry(inFolder: runs) { entry in
            if let name = entry.name, name.hasSuffix(".jsonl"), !name.hasPrefix(".") { logs.append(name) }
        }
        for log in logs {
            let fd = openat(runs, log, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { continue }
            var info = stat()
            guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                close(fd)
                continue
            }
            let reader = LineReader(descriptor: fd)
            while let line = try? reader.next() {
                guard let record = try? JSONParser.parse(Array(line)), let key = record["key"]?.stringValue, keys.contains(key),
                    let output = record["output"]?.stringValue,
                    record["stale"] == .bool(true) || record["status"]?.stringValue.flatMap(JobStatus.init(rawValue:))?.isSuccess == true
                else { continue }
                outputs.insert(output)
            }
        }
        return outputs
    }

    /// One folder of the output directory as the walk holds it: open by its descriptor, with
    /// the names of the entries in it that are not folders.
    struct WalkedFolder {
        /// The folder's descriptor, open while the walk is in it: every look at or removal of a
        /// file goes through it (`fstatat`, `unlinkat`), so nothing is resolved from the root again.
        let fd: Int32
        /// Its path relative to the output directory ("" for the directory itself).
        let path: String
        /// The names of its entries that are not folders, as listed.
        let files: [String]

        /// The relative path of the entry `name` in this folder.
        func path(of name: String) -> String { path.isEmpty ? name : path + "/" + name }
    }

    /// Calls `visit` with every payload folder of the output directory: all but `results/` and
    /// `runs/`, each with its files but dot-files other than a cut transfer's kept bytes and
    /// sidecar (`.partial-…`). The walk goes by descriptor: each folder is opened from its
    /// parent's descriptor (`openat` with `O_NOFOLLOW | O_DIRECTORY`), so a folder swapped for a
    /// link after it was listed is not followed, and a folder moved while it is visited is still
    /// the one listed. `afterListing` (for tests) is called with a folder's relative path after
    /// its listing and before `visit`.
    func forEachPayloadFolder(afterListing: ((_ folder: String) -> Void)? = nil, _ visit: (WalkedFolder) -> Void) {
        func walk(_ fd: Int32, _ relative: String) {
            var files: [String] = []
            var folders: [String] = []
            FolderReader.forEachEntry(inFolder: fd) { entry in
                guard let name = entry.name, !name.hasPrefix(".") || name.hasPrefix(PartialDownload.prefix) else { return }
                if relative.isEmpty && (name == "results" || name == "runs") { return }
                var info = stat()
                if entry.isDirectory
                    || (entry.type == UInt8(DT_UNKNOWN) && fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 && (info.st_mode & S_IFMT) == S_IFDIR)
                {
                    folders.append(name)
                } else {
                    files.append(name)
                }
            }
            afterListing?(relative)
            visit(WalkedFolder(fd: fd, path: relative, files: files))
            for name in folders {
                // A link where the folder was (or anything but a folder) fails here: never followed.
                let child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard child >= 0 else { continue }
                walk(child, relative.isEmpty ? name : relative + "/" + name)
                close(child)
            }
        }
        walk(rootFolder.fd, "")
    }
}
