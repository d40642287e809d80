import Foundation
import RunnerKit

/// Kinds read from folders of kind files (`--kinds DIR`, `$RUNNER_KINDS`): every `<name>.json`
/// in each folder, in name order. Other files (an executable kind's program) are left alone.
public enum KindFolders {
    /// The environment variable naming kind folders, colon-separated.
    public static let environmentVariable = "RUNNER_KINDS"

    /// The folders to read: those given, else those of `$RUNNER_KINDS`, else none.
    public static func folders(given: [String], environment: [String: String]) -> [String] {
        if !given.isEmpty { return given }
        guard let value = environment[environmentVariable] else { return [] }
        return value.split(separator: ":").map(String.init).filter { !$0.isEmpty }
    }

    /// The built-in kinds and those of the kind files in `folders` (every `<name>.json`, in
    /// name order), as `runner run --kinds DIR` knows them. A program registers its own
    /// compiled kinds on the registry it returns.
    /// - Throws: the first bad kind file, naming the file and the field, as a bad job file is
    ///   named (`runner` exits 2 with it); a folder that cannot be read; a name defined twice,
    ///   naming both sources.
    public static func registry(folders: [String]) throws(JobFileError) -> KindRegistry {
        var registry = BuiltInKinds.registry()
        var files: [KindFile] = []
        for folder in folders {
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }.sorted()
            } catch {
                throw JobFileError(file: folder, "cannot be read as a folder of kind files")
            }
            for name in names {
                let path = folder.hasSuffix("/") ? folder + name : "\(folder)/\(name)"
                let file = try KindFile.read(path: path)
                do {
                    try registry.register(file.definition())
                } catch let error as KindRegistry.DuplicateKind {
                    throw JobFileError(file: path, location: .file, problem: JobSpecError(field: "kind", error.description))
                } catch {
                    throw JobFileError(file: path, "\(error)")
                }
                files.append(file)
            }
        }
        // Children may name kinds of files read later: judged once every kind is known; then
        // each program is looked for.
        for file in files {
            do {
                try file.checkChildren(against: registry)
                try file.checkProgram()
            } catch {
                throw JobFileError(file: file.path, location: .file, problem: error)
            }
        }
        return registry
    }
}

extension KindFile {
    /// The registry's view of this kind.
    public func definition() -> KindDefinition {
        let file = self
        return KindDefinition(
            name: name, summary: summary, parameters: parameters, source: path, accept: accept,
            decode: { (fields: inout JobFields) throws(JobSpecError) -> any DecodedJob in
                let values = try FileKindParameters(file.parameters, fields: &fields)
                if file.exec != nil { return ExecutableKind(file: file, parameters: values) }
                return DeclarativeKind(file: file, parameters: values)
            })
    }
}
