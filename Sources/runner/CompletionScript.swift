import Foundation

/// Completion scripts for bash, zsh and fish, written from the command table that the parser and
/// the help read: subcommands, their options, and what each value may be (a file, a folder, a
/// kind name, one of a few words).
struct CompletionScript {
    var commands: [CommandSpec]
    var topOptions: [CommandSpec.Option]
    var kinds: [String]

    // MARK: - bash

    var bash: String {
        let names = commands.map(\.name).joined(separator: " ")
        var text = """
            # bash completion for runner (runner completions bash); generated from its command table.
            _runner() {
                local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
                COMPREPLY=()
                if [[ $COMP_CWORD -eq 1 ]]; then
                    COMPREPLY=($(compgen -W '\(names) \(topOptions.map { "--" + $0.name }.joined(separator: " "))' -- "$cur"))
                    return
                fi
                case ${COMP_WORDS[1]} in

            """
        for command in commands {
            text += "    \(command.name))\n"
            let valued = command.options.filter { $0.value != nil }
            if !valued.isEmpty {
                text += "        case $prev in\n"
                for option in valued {
                    text += "            --\(option.name)) \(bashReply(option.valueCompletion))return ;;\n"
                }
                text += "        esac\n"
            }
            let options = (command.options.map { "--" + $0.name } + ["--help"]).joined(separator: " ")
            text += "        if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W '\(options)' -- \"$cur\")); return; fi\n"
            let reply = bashReply(command.argumentCompletion)
            if !reply.isEmpty { text += "        \(reply.trimmingCharacters(in: .whitespaces))\n" }
            text += "        ;;\n"
        }
        text += """
                esac
            }
            complete -o filenames -F _runner runner

            """
        return text
    }

    private func bashReply(_ completion: ValueCompletion) -> String {
        switch completion {
        case .nothing: return ""
        case .files: return "COMPREPLY=($(compgen -f -- \"$cur\")); "
        case .directories: return "COMPREPLY=($(compgen -d -- \"$cur\")); "
        case .kinds: return "COMPREPLY=($(compgen -W '\(kinds.joined(separator: " "))' -- \"$cur\")); "
        case .subcommands: return "COMPREPLY=($(compgen -W '\(commands.map(\.name).joined(separator: " "))' -- \"$cur\")); "
        case .words(let words): return "COMPREPLY=($(compgen -W '\(words.joined(separator: " "))' -- \"$cur\")); "
        }
    }

    // MARK: - zsh

    var zsh: String {
        var text = """
            #compdef runner
            # zsh completion for runner (runner completions zsh); generated from its command table.
            _runner() {
              local -a subcommands
              subcommands=(

            """
        for command in commands {
            text += "    \(zshQuote(command.name + ":" + command.summary))\n"
        }
        text += """
              )
              if (( CURRENT == 2 )); then
                if [[ $words[2] == -* ]]; then
                  _arguments \(topOptions.map { zshQuote("--\($0.name)[\(zshBracket($0.help))]") }.joined(separator: " "))
                else
                  _describe -t subcommands 'runner subcommand' subcommands
                fi
                return
              fi
              local subcommand=${words[2]}
              shift words
              (( CURRENT-- ))
              case $subcommand in

            """
        for command in commands {
            var specs = command.options.map { option -> String in
                var spec = "--\(option.name)[\(zshBracket(option.fullHelp))]"
                if let value = option.value { spec += ":\(zshMessage(value)):\(zshAction(option.valueCompletion))" }
                return zshQuote(spec)
            }
            specs.append(zshQuote("--help[Show help information.]"))
            if command.positionals.max != 0, let argument = command.arguments.first {
                let many = command.positionals.max == nil
                specs.append(zshQuote("\(many ? "*" : "1"):\(zshMessage(argument.name)):\(zshAction(command.argumentCompletion))"))
            }
            text += "    \(command.name))\n      _arguments \\\n        " + specs.joined(separator: " \\\n        ") + "\n      ;;\n"
        }
        text += """
              esac
            }
            if [[ $funcstack[1] == _runner ]]; then
              _runner "$@"
            else
              compdef _runner runner
            fi

            """
        return text
    }

    private func zshAction(_ completion: ValueCompletion) -> String {
        switch completion {
        case .nothing: return " "
        case .files: return "_files"
        case .directories: return "_files -/"
        case .kinds: return "(\(kinds.joined(separator: " ")))"
        case .subcommands: return "(\(commands.map(\.name).joined(separator: " ")))"
        case .words(let words): return "(\(words.joined(separator: " ")))"
        }
    }

    /// A zsh word in single quotes.
    private func zshQuote(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }

    /// Text inside `[…]` of an `_arguments` spec: brackets and colons escaped.
    private func zshBracket(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "[", with: "\\[").replacingOccurrences(of: "]", with: "\\]").replacingOccurrences(of: ":", with: "\\:")
    }

    /// The message part of an `_arguments` spec, which ends at a colon.
    private func zshMessage(_ text: String) -> String { text.replacingOccurrences(of: ":", with: "\\:") }

    // MARK: - fish

    var fish: String {
        var text = """
            # fish completion for runner (runner completions fish); generated from its command table.
            complete -c runner -f

            """
        let none = "__fish_use_subcommand"
        for option in topOptions {
            text += "complete -c runner -n \(none) -l \(option.name) -d \(fishQuote(option.fullHelp))\n"
        }
        for command in commands {
            text += "complete -c runner -n \(none) -a \(command.name) -d \(fishQuote(command.summary))\n"
        }
        for command in commands {
            let when = fishQuote("__fish_seen_subcommand_from \(command.name)")
            for option in command.options {
                var line = "complete -c runner -n \(when) -l \(option.name)"
                if option.value != nil { line += fishValue(option.valueCompletion) }
                text += line + " -d \(fishQuote(option.fullHelp))\n"
            }
            text += "complete -c runner -n \(when) -l help -d \(fishQuote("Show help information."))\n"
            switch command.argumentCompletion {
            case .nothing: break
            case .files: text += "complete -c runner -n \(when) -F\n"
            case let other: text += "complete -c runner -n \(when)\(fishValue(other).replacingOccurrences(of: " -x", with: ""))\n"
            }
        }
        return text
    }

    private func fishValue(_ completion: ValueCompletion) -> String {
        switch completion {
        case .nothing: return " -x"
        case .files: return " -r -F"
        case .directories: return " -x -a \(fishQuote("(__fish_complete_directories (commandline -ct))"))"
        case .kinds: return " -x -a \(fishQuote(kinds.joined(separator: " ")))"
        case .subcommands: return " -x -a \(fishQuote(commands.map(\.name).joined(separator: " ")))"
        case .words(let words): return " -x -a \(fishQuote(words.joined(separator: " ")))"
        }
    }

    /// A fish word in single quotes (where only `\'` and `\\` are escapes).
    private func fishQuote(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }
}
