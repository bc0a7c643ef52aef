#include "win32.hpp"

#include <algorithm>
#include <cwctype>

#include "command_line.hpp"

namespace dsh::win32 {

std::optional<std::wstring> widen(std::string_view text) {
    const std::optional<std::u16string> wide = utf8_to_utf16(text);
    if (!wide) return std::nullopt;
    return std::wstring(wide->begin(), wide->end());
}

std::string narrow(std::wstring_view text) { return utf16_to_utf8(std::u16string(text.begin(), text.end())); }

std::filesystem::path to_path(const std::string& utf8) {
    return std::filesystem::path(std::u8string(reinterpret_cast<const char8_t*>(utf8.data()), utf8.size()));
}

std::string from_path(const std::filesystem::path& path) {
    const std::u8string text = path.u8string();
    return std::string(reinterpret_cast<const char*>(text.data()), text.size());
}

std::string error_text(DWORD error) {
    wchar_t* buffer = nullptr;
    const DWORD length = FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
                                        nullptr, error, 0, reinterpret_cast<wchar_t*>(&buffer), 0, nullptr);
    std::string text = length ? narrow(std::wstring_view(buffer, length)) : std::string("unknown error");
    if (buffer) LocalFree(buffer);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
    return text + " (error " + std::to_string(error) + ")";
}

Handle make_kill_on_close_job(std::string* error) {
    Handle job(CreateJobObjectW(nullptr, nullptr));
    if (!job) {
        if (error) *error = "CreateJobObject: " + error_text(GetLastError());
        return Handle();
    }
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION limits{};
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    if (!SetInformationJobObject(job.get(), JobObjectExtendedLimitInformation, &limits, sizeof limits)) {
        if (error) *error = "SetInformationJobObject: " + error_text(GetLastError());
        return Handle();
    }
    return job;
}

namespace {

Handle inheritable_copy(HANDLE handle) {
    if (handle == nullptr || handle == INVALID_HANDLE_VALUE) return Handle();
    HANDLE copy = nullptr;
    if (!DuplicateHandle(GetCurrentProcess(), handle, GetCurrentProcess(), &copy, 0, TRUE, DUPLICATE_SAME_ACCESS))
        return Handle();
    return Handle(copy);
}

}  // namespace

Started start_child(const ChildStart& start) {
    Started out;
    const std::optional<std::string> line = build_command_line(start.argv);
    const std::optional<std::wstring> program = widen(start.program);
    const std::optional<std::wstring> command = line ? widen(*line) : std::nullopt;
    if (!program || !command) {
        out.error = "the command line cannot be passed to Windows (a quote in the program name, or invalid UTF-8)";
        out.errorCode = ERROR_INVALID_PARAMETER;
        return out;
    }
    std::vector<wchar_t> mutable_command(command->begin(), command->end());
    mutable_command.push_back(L'\0');

    // Only these handles are inherited, whatever else happens to be inheritable.
    Handle in = inheritable_copy(start.stdinHandle), outh = inheritable_copy(start.stdoutHandle),
           err = inheritable_copy(start.stderrHandle);
    std::vector<HANDLE> inherited;
    for (const Handle* h : {&in, &outh, &err})
        if (*h && std::find(inherited.begin(), inherited.end(), h->get()) == inherited.end()) inherited.push_back(h->get());
    SIZE_T size = 0;
    InitializeProcThreadAttributeList(nullptr, 1, 0, &size);
    std::vector<unsigned char> storage(size);
    auto* attributes = reinterpret_cast<LPPROC_THREAD_ATTRIBUTE_LIST>(storage.data());
    if (!InitializeProcThreadAttributeList(attributes, 1, 0, &size)) {
        out.errorCode = GetLastError();
        out.error = "InitializeProcThreadAttributeList: " + error_text(out.errorCode);
        return out;
    }
    if (!inherited.empty() &&
        !UpdateProcThreadAttribute(attributes, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, inherited.data(),
                                   inherited.size() * sizeof(HANDLE), nullptr, nullptr)) {
        out.errorCode = GetLastError();
        out.error = "UpdateProcThreadAttribute: " + error_text(out.errorCode);
        DeleteProcThreadAttributeList(attributes);
        return out;
    }
    STARTUPINFOEXW info{};
    info.StartupInfo.cb = sizeof info;
    info.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    info.StartupInfo.hStdInput = in.get();
    info.StartupInfo.hStdOutput = outh.get();
    info.StartupInfo.hStdError = err.get();
    info.lpAttributeList = attributes;
    const DWORD flags = CREATE_SUSPENDED | CREATE_UNICODE_ENVIRONMENT | EXTENDED_STARTUPINFO_PRESENT;
    void* environment = start.environment ? const_cast<wchar_t*>(start.environment->c_str()) : nullptr;
    PROCESS_INFORMATION process{};
    const BOOL inherit = inherited.empty() ? FALSE : TRUE;
    const BOOL created =
        start.token ? CreateProcessAsUserW(start.token, program->c_str(), mutable_command.data(), nullptr, nullptr, inherit,
                                           flags, environment, nullptr, &info.StartupInfo, &process)
                    : CreateProcessW(program->c_str(), mutable_command.data(), nullptr, nullptr, inherit, flags, environment,
                                     nullptr, &info.StartupInfo, &process);
    const DWORD created_error = GetLastError();
    DeleteProcThreadAttributeList(attributes);
    if (!created) {
        out.errorCode = created_error;
        out.error = (start.token ? "CreateProcessAsUser: " : "CreateProcess: ") + error_text(created_error);
        return out;
    }
    Handle thread(process.hThread);
    out.process.reset(process.hProcess);
    if (start.job && !AssignProcessToJobObject(start.job, process.hProcess)) {
        out.errorCode = GetLastError();
        out.error = "AssignProcessToJobObject: " + error_text(out.errorCode);
        TerminateProcess(process.hProcess, 125);
        out.process.reset();
        return out;
    }
    ResumeThread(thread.get());
    return out;
}

std::wstring environment_block(const std::vector<std::pair<std::string, std::string>>& overrides) {
    auto upper = [](std::wstring text) {
        for (auto& c : text) c = static_cast<wchar_t>(std::towupper(c));
        return text;
    };
    std::vector<std::wstring> entries;
    if (wchar_t* block = GetEnvironmentStringsW()) {
        for (const wchar_t* entry = block; *entry; entry += std::wcslen(entry) + 1) entries.emplace_back(entry);
        FreeEnvironmentStringsW(block);
    }
    for (const auto& [name, value] : overrides) {
        const std::wstring key = upper(widen(name).value_or(L"") + L"=");
        entries.erase(std::remove_if(entries.begin(), entries.end(),
                                     [&](const std::wstring& entry) { return upper(entry.substr(0, key.size())) == key; }),
                      entries.end());
        entries.push_back(widen(name).value_or(L"") + L"=" + widen(value).value_or(L""));
    }
    std::wstring out;
    for (const auto& entry : entries) {
        out += entry;
        out.push_back(L'\0');
    }
    if (entries.empty()) out.push_back(L'\0');
    return out;  // the final terminator is the string's own NUL
}

}  // namespace dsh::win32
