import Foundation
import RunnerKinds
import RunnerKit

/// `runner validate FILE…`: the checks of `run`, without running anything.
enum ValidateCommand {
    static let spec: CommandSpec = CommandSpec(
        name: "validate",
        summary: "Check job files without running them: every error names the file, the job and the field.",
        usage: "FILE…",
        arguments: [("FILE…", "Job files to check.")],
        options: [KindOptions.option],
        positionals: (1, nil),
        run: { arguments in
            guard let registry = KindOptions.registry(arguments) else { return 2 }
            var valid = true
            for file in arguments.positionals {
                let report = JobFileReader.validate(path: file, registry: registry)
                if report.errors.isEmpty {
                    Console.out("\(file): \(report.jobs) job\(report.jobs == 1 ? "" : "s"), valid")
                } else {
                    valid = false
                    for error in report.errors { Console.error(error.description) }
                }
            }
            return valid ? 0 : 2
        })
}

/// `runner kinds`: the registered kinds and their parameters.
enum KindsCommand {
    static let spec: CommandSpec = CommandSpec(
        name: "kinds",
        summary: "List the job kinds this runner knows, with their parameters.",
        usage: "[--kinds DIR]",
        options: [KindOptions.option],
        run: { arguments in
            guard let registry = KindOptions.registry(arguments) else { return 2 }
            var text = "Fields of every job:\n"
            let common: [(String, String)] = [
                ("kind", "string, required: which kind runs the job"),
                ("url", "http or https URL, required; {id} is replaced where a kind takes an id"),
                ("key", "string: identity of the task (default: derived from kind and target)"),
                ("timeout", "seconds: deadline of one attempt, waiting included (default: 2)"),
                ("noticeAfter", "seconds without network before the notice (default: 0.5)"),
                ("retries", "int: further attempts after a transient failure (default: 0)"),
                ("maxBytes", "int: largest payload accepted (default: 67108864)"),
                ("output", "relative path of the payload (default: derived from the key)"),
            ]
            for (name, help) in common { text += CommandSpec.row(name, help) }
            for kind in registry.all {
                text += "\n\(kind.name) (\(kind.source)): \(kind.summary)\n"
                if kind.parameters.isEmpty { text += "  (no fields of its own)\n" }
                for parameter in kind.parameters {
                    var left = "\(parameter.name) (\(parameter.type.rawValue)"
                    left += parameter.required ? ", required)" : ")"
                    let right = parameter.summary + (parameter.defaultValue.map { " (default: \($0))" } ?? "")
                    text += CommandSpec.row(left, right)
                }
            }
            Console.out(text)
            return 0
        })
}
