import Foundation
import RunnerKinds
import RunnerKit

/// `runner validate FILE…`: the checks of `run`, without running anything.
enum ValidateCommand {
    static let spec: CommandSpec = CommandSpec(
        name: "validate",
        summary: "Check job files without running them: every error names the file, the job and the field.",
        synopsis: "FILE…",
        arguments: [("FILE…", "Job files to check; - is standard input.")],
        options: KindOptions.options,
        positionals: (1, nil),
        run: { arguments in
            guard let registry = KindOptions.registry(arguments) else { return 2 }
            let inputs: JobFileArguments
            do { inputs = try JobFileArguments(arguments.positionals) } catch { return Runner.usageError(error, spec: spec) }
            defer { inputs.remove() }
            var valid = true
            for file in inputs.files {
                let report = JobFileReader.validate(path: file, registry: registry)
                if report.errors.isEmpty {
                    Console.out("\(inputs.display(file)): \(report.jobs) job\(report.jobs == 1 ? "" : "s"), valid")
                } else {
                    valid = false
                    for error in report.errors { Console.error(inputs.display(message: error.description)) }
                }
            }
            return valid ? 0 : 2
        })
}

/// `runner kinds [KIND]`: the registered kinds and their parameters.
enum KindsCommand {
    /// The names of the built-in kinds, in the registry's order.
    static var kindNames: [String] { BuiltInKinds.registry().names }

    static let spec: CommandSpec = CommandSpec(
        name: "kinds",
        summary: "List the job kinds this runner knows, with their parameters.",
        synopsis: "[KIND]",
        arguments: [("KIND", "Show only this kind's parameters.")],
        options: KindOptions.options,
        positionals: (0, 1),
        run: { arguments in
            guard let registry = KindOptions.registry(arguments, checkingSecrets: false) else { return 2 }
            let kinds = registry.all
            var text = ""
            if let name = arguments.positionals.first {
                guard let kind = kinds.first(where: { $0.name == name }) else {
                    return Runner.usageError(UsageError("Unknown kind '\(name)'; the kinds are \(kinds.map(\.name).joined(separator: ", "))"), spec: spec)
                }
                text = describe(kind)
            } else {
                text = "Fields of every job:\n"
                let common: [(String, String)] = [
                    ("kind", "string, required: which kind runs the job"),
                    ("url", "http or https URL, required; {id} is replaced where a kind takes an id"),
                    ("key", "string: identity of the task (default: derived from kind and target)"),
                    ("timeout", "seconds: deadline of one attempt, waiting included (default: \(JobDescriptor.defaultTimeout.secondsText); file: a day)"),
                    ("noticeAfter", "seconds without network before the notice (default: \(JobDescriptor.defaultNoticeAfter.secondsText))"),
                    ("retries", "int: further attempts after a transient failure (default: 0)"),
                    ("maxBytes", "int: largest payload accepted (default: \(JobDescriptor.defaultMaxBytes); file: 16 GiB)"),
                    ("output", "relative path of the payload; {urlPath} is the URL's path, as wget -x keeps it (default: derived from the key)"),
                    ("childOutput", "output of the job's children that set none, with {urlPath} (each child's own URL's path); inherited (default: none)"),
                    ("checksum", "sha256:<hex>: the digest the stored payload must have (default: none)"),
                    ("headers", "object of strings: request headers, to the job's origin only; {env:NAME} and {file:PATH} expand when sent (under run only)"),
                    ("keepStale", "true: after a 404 or 410 the last payload stays, its record pointing at it as stale (default: false)"),
                    ("unique", "true: submit --queue leaves the job out while a job of its key is queued or running (default: false)"),
                    ("stall", "seconds: an attempt whose body moved less than lowSpeed bytes a second this long fails, timedOut (default: \(JobDescriptor.defaultStall.secondsText))"),
                    ("lowSpeed", "int: bytes a second a body must move to not stall (default: \(JobDescriptor.defaultLowSpeed))"),
                ]
                for (name, help) in common { text += CommandSpec.row(name, help) }
                for kind in kinds { text += "\n" + describe(kind) }
            }
            Console.out(text)
            return 0
        })

    private static func describe(_ kind: KindDefinition) -> String {
        var text = "\(kind.name) (\(kind.source)): \(kind.summary)\n"
        if kind.parameters.isEmpty { text += "  (no fields of its own)\n" }
        for parameter in kind.parameters {
            var left = "\(parameter.name) (\(parameter.type.rawValue)"
            left += parameter.required ? ", required)" : ")"
            let right = parameter.summary + (parameter.defaultText.map { " (default: \($0))" } ?? "")
            text += CommandSpec.row(left, right)
        }
        return text
    }
}
