# SPDX-License-Identifier: MIT
"""runtime.py - gdb commands for programs that use libruntime's fibers.

Load it with   gdb -x tools/gdb/runtime.py PROGRAM [CORE]
or, in gdb:    (gdb) source tools/gdb/runtime.py

  runtime fibers [RT]       every fiber of every core, as runtime_dump prints
                            it: id, state, what it waits on and for how long,
                            its name; "*" marks the fiber a core runs now.
                            RT: a struct runtime * expression, if the
                            runtimes cannot be found (see below).
  info fibers [RT]          the same.
  runtime fiber-bt FIBER [BT-ARGS]
                            the backtrace of one fiber, named by its id, its
                            name or its struct fiber address (0x...);
                            BT-ARGS go to bt (e.g. "full", "-frame-info
                            short-location").

Cores are found through each thread's runtime__tls_core and through the
stack slab directory (runtime__slab_dir), so they need libruntime's debug
info (it builds with -g by default). A suspended fiber's backtrace starts
from the context that runtime__switch saved on its stack
(runtime/switch_x86_64.S, runtime/switch_aarch64.S): the selected thread
briefly takes the fiber's stack pointer, frame pointer, callee-saved
registers and return address, bt runs, and every register is put back,
also on error. Where registers cannot be written (a core file), a Python
unwinder gives the same frames instead.
"""

import struct

import gdb

try:
    from gdb.unwinder import Unwinder, register_unwinder
except ImportError:  # gdb without the unwinder API (before 7.10)
    Unwinder = object
    register_unwinder = None

NEVER = (1 << 64) - 1
MAX_FIBERS = 10_000_000  # per core: a longer list is corrupt
MAX_CORES = 65536
SLAB_DIR_CHUNK = 4096  # runtime/stack.h

# runtime/debug.c's names, by enumerator name.
BLOCK_NAMES = {
    "BLOCK_NONE": "-", "BLOCK_IO": "io", "BLOCK_STREAM": "stream",
    "BLOCK_SLEEP": "sleep", "BLOCK_PARK": "park", "BLOCK_JOIN": "join",
    "BLOCK_MUTEX": "mutex", "BLOCK_COND": "cond",
    "BLOCK_WAITGROUP": "waitgroup", "BLOCK_SEM": "sem/pool",
    "BLOCK_CHAN": "chan", "BLOCK_OFFLOAD": "offload", "BLOCK_CLOSE": "close",
}
BLOCK_ORDER = list(BLOCK_NAMES)  # enum block's order, if no debug info
STATE_NAMES = ["ready", "running", "waiting", "done"]  # enum fiber_state
FIBER_RUNNING, FIBER_SUSPENDED = 1, 2
FIBER_CANCELLED, FIBER_LOOP, FIBER_SHIELDED = 1 << 0, 1 << 3, 1 << 4  # enum fiber_flags
SYNC_KINDS = ("mutex", "cond", "waitgroup", "sem/pool", "chan")

# IORING_OP_* numbers (kernel ABI) with debug.c's names; others are "op".
# enum io_kind (runtime/engine.h), in its order: what a fiber blocked in
# I/O waits for, whichever engine runs. Read from the debug info when it
# has the enum; this list is the fallback.
IO_NAMES = ["read", "write", "readv", "writev", "recv", "send", "recvmsg",
            "sendmsg", "accept", "connect", "openat", "openat2", "statx",
            "splice", "fsync", "shutdown", "poll", "close"]

# What the switch leaves at the saved sp (runtime/switch.h): (register, byte
# offset), the offset that the stack pointer has once the switch has
# returned, and the register the switch returns to (x86_64: the resume
# address at 0; aarch64: x30, which ret jumps to). On x86_64 the switch
# saves only rbp: the code around it keeps what else is live in its own
# frame, where the debug info finds it.
FRAMES = {
    "x86_64": {
        "saved": [("rbp", 0x08)],
        "pc_at": 0x00, "sp_after": 0x98, "sp": "rsp", "pc": "rip",
    },
    "aarch64": {
        "saved": [("x%d" % n, 8 * (n - 19)) for n in range(19, 31)],
        "pc_at": 88, "sp_after": 176, "sp": "sp", "pc": "pc",
    },
}


class Problem(gdb.GdbError):
    """An error the user gets as one line, without a Python traceback."""


# ------------------------------------------------------------ debug info

def _lookup_symbol(name):
    """A global or file-static symbol with debug info, or None."""
    sym = gdb.lookup_global_symbol(name)
    if sym is None:
        sym = gdb.lookup_static_symbol(name)
    return sym


def _param_type(function, index, fallback):
    """The type of a library function's parameter: the library's own type
    even where the program defines a type of the same name."""
    sym = _lookup_symbol(function)
    try:
        return sym.type.fields()[index].type.strip_typedefs()
    except (AttributeError, IndexError, gdb.error):
        return gdb.lookup_type(fallback).pointer()


def _enum_names(function, index, fallback):
    """{value: enumerator name} of an enum parameter, or None."""
    try:
        enum = _param_type(function, index, fallback).strip_typedefs()
        return {int(f.enumval): f.name for f in enum.fields()}
    except (gdb.error, AttributeError):
        return None


def _field_offset(struct_type, name):
    for field in struct_type.fields():
        if field.name == name:
            return field.bitpos // 8
    raise Problem("runtime: struct fiber has no field %r: the "
                  "script does not match this libruntime" % name)


class Layout:
    """The library's types, read from its debug info."""

    def __init__(self):
        self.tls = _lookup_symbol("runtime__tls_core")
        if self.tls is None:
            raise Problem(
                "runtime: no fiber runtime in this process: no symbol "
                "runtime__tls_core (libruntime not loaded yet, or built "
                "without debug info)")
        self.core_ptr = self.tls.type.strip_typedefs()
        core = self.core_ptr.target().strip_typedefs()
        self.fiber = core["sched"].type.strip_typedefs()["loop"].type.strip_typedefs()
        self.fiber_ptr = self.fiber.pointer()
        self.rt_ptr = core["rt"].type.strip_typedefs()
        self.all_offset = _field_offset(self.fiber, "all")
        self.io_wait_ptr = _param_type("runtime__io_wait_name", 0,
                                       "struct io_wait")
        self.io_names = self._io_names()
        self.mshot_ptr = _param_type("runtime__mshot_init", 0, "struct mshot")
        self.wait_ptr = _param_type("runtime__wait_init", 0, "struct wait")
        self.blocks = self._block_names()

    @staticmethod
    def _io_names():
        try:
            enum = gdb.lookup_type("enum io_kind")
            return {int(f.enumval): f.name[3:].lower() for f in enum.fields()
                    if f.name != "IO_KINDS"}
        except gdb.error:
            return dict(enumerate(IO_NAMES))

    @staticmethod
    def _block_names():
        names = _enum_names("runtime__suspend", 1, "enum block")
        if not names:
            names = dict(enumerate(BLOCK_ORDER))
        return {v: BLOCK_NAMES.get(n, n.replace("BLOCK_", "").lower())
                for v, n in names.items()}

    def fiber_at(self, addr):
        return gdb.Value(addr).cast(self.fiber_ptr).dereference()


# ---------------------------------------------------------- small helpers

def _u64(value):
    """A gdb.Value (integer or pointer) as a Python int."""
    try:
        return int(value)
    except gdb.error:
        return int(value.cast(gdb.lookup_type("unsigned long")))


def _read_u64(addr):
    data = gdb.selected_inferior().read_memory(addr, 8)
    return struct.unpack("<Q", bytes(data))[0]


def _read_ptrs(addr, count):
    data = bytes(gdb.selected_inferior().read_memory(addr, 8 * count))
    return struct.unpack("<%dQ" % count, data)


def _c_string(array):
    """A char array's text up to its NUL, never raising on bad bytes."""
    size = array.type.strip_typedefs().sizeof
    memory = gdb.selected_inferior().read_memory(_u64(array.address), size)
    data = bytes(memory)
    return data.split(b"\0", 1)[0].decode("utf-8", "backslashreplace")


def _ms(ns):
    """ns / 1e6 truncated toward zero, as C's division."""
    return ns // 1000000 if ns >= 0 else -(-ns // 1000000)


def _require_process():
    inferior = gdb.selected_inferior()
    if inferior is None or not inferior.threads():
        raise Problem("runtime: no process: run the program, attach "
                      "to it, or load a core file")


class _KeepSelection:
    """Put the selected thread and frame back on exit."""

    def __enter__(self):
        self.thread = gdb.selected_thread()
        try:
            self.level = gdb.selected_frame().level()
        except gdb.error:
            self.level = None
        return self

    def __exit__(self, *exc):
        if self.thread is not None and self.thread.is_valid():
            self.thread.switch()
            if self.level is not None:
                _select_level(self.level)
        return False


def _select_level(level):
    frame = gdb.newest_frame()
    while frame is not None and frame.level() < level:
        frame = frame.older()
    if frame is not None:
        frame.select()


# -------------------------------------------------------------- discovery

def _tls_core(layout):
    """This thread's runtime__tls_core, or 0 (also if unreadable)."""
    try:
        value = layout.tls.value()
    except gdb.error:
        try:
            value = gdb.parse_and_eval("runtime__tls_core")
        except gdb.error:
            return 0
    if value.is_optimized_out:
        return 0
    return _u64(value)


def thread_cores(layout):
    """{struct core address: gdb thread} from every thread's TLS."""
    cores = {}
    with _KeepSelection():
        for thread in sorted(gdb.selected_inferior().threads(),
                             key=lambda t: t.num):
            thread.switch()
            addr = _tls_core(layout)
            if addr:
                cores.setdefault(addr, thread)
    return cores


def _slab_dir_runtimes(layout):
    """Runtime addresses that own a stack slab (runtime__slab_dir): found
    without TLS, so also for runtimes that are not running."""
    sym = _lookup_symbol("runtime__slab_dir")
    if sym is None:
        return []
    dir_type = sym.type.strip_typedefs()
    # slab_dir_chunk: struct slab *_Atomic *_Atomic
    slab_ptr = dir_type.target().strip_typedefs().target().unqualified()
    found = []
    try:
        chunks = _read_ptrs(_u64(sym.value().address), dir_type.sizeof // 8)
        for chunk in (c for c in chunks if c):
            for slab in (s for s in _read_ptrs(chunk, SLAB_DIR_CHUNK) if s):
                rt = _slab_runtime(layout, slab_ptr, slab)
                if rt and rt not in found:
                    found.append(rt)
    except gdb.error:
        pass
    return found


def _slab_runtime(layout, slab_ptr, slab):
    core = gdb.Value(slab).cast(slab_ptr).dereference()["core"]
    return _core_runtime(layout, _u64(core))


def _core_runtime(layout, core):
    return _u64(gdb.Value(core).cast(layout.core_ptr).dereference()["rt"])


def find_runtimes(layout, expr=None):
    """[runtime address], and {core address: thread}."""
    cores = thread_cores(layout)
    if expr:
        rts = [_u64(_eval_runtime(layout, expr))]
    else:
        rts = []
        for core in cores:
            rt = _core_runtime(layout, core)
            if rt not in rts:
                rts.append(rt)
        rts += [rt for rt in _slab_dir_runtimes(layout) if rt not in rts]
    if not rts:
        raise Problem(
            "runtime: libruntime is loaded but no runtime was found: no "
            "thread runs a core (runtime__tls_core is NULL everywhere) and "
            "no fiber stack exists; name one: runtime fibers RT-EXPRESSION")
    return rts, cores


def _eval_runtime(layout, expr):
    try:
        value = gdb.parse_and_eval(expr)
    except gdb.error as err:
        raise Problem("runtime: %s: %s" % (expr, err))
    if value.is_optimized_out:
        raise Problem("runtime: %s is optimized out here; try another "
                      "frame, or its address" % expr)
    return value.cast(layout.rt_ptr)


# ------------------------------------------------------------------ fibers

class Fiber:
    """One fiber as the listing and fiber-bt see it."""

    def __init__(self, layout, addr, core):
        value = layout.fiber_at(addr)
        self.layout, self.addr, self.core = layout, addr, core
        self.value = value
        self.id = _u64(value["id"])
        self.state = int(value["state"])
        self.flags = int(value["flags"])
        self.name = _c_string(value["name"])
        self.running = (self.state == FIBER_RUNNING and
                        _u64(core.value["sched"]["current"]) == addr)

    def what(self):
        """What it waits for, as debug.c's what(): "io recv fd 7"..."""
        kind = self.layout.blocks.get(int(self.value["block"]), "-")
        obj = _u64(self.value["wait_obj"])
        if not obj or kind not in ("io", "stream") + SYNC_KINDS:
            return kind
        if kind == "io":
            wait = gdb.Value(obj).cast(self.layout.io_wait_ptr).dereference()
            return "io %s fd %d" % (
                self.layout.io_names.get(int(wait["kind"]), "op"),
                int(wait["fd"]))
        if kind == "stream":
            mshot = gdb.Value(obj).cast(self.layout.mshot_ptr).dereference()
            return "stream fd %d" % int(mshot["fd"])
        return "%s %s" % (kind, self._wait_target(obj))

    def _wait_target(self, obj):
        wait = gdb.Value(obj).cast(self.layout.wait_ptr).dereference()
        if not int(wait["nwaiters"]):
            return "(nil)"
        return "0x%x" % _u64(wait["waiters"][0]["q"])

    def line(self, now):
        """debug.c's fiber_line, "*" first for the fiber its core runs."""
        state = STATE_NAMES[self.state] if self.state < 4 else "?"
        mark = "* " if self.running else "  "
        text = "%sfiber %d %-8s " % (mark, self.id, state)
        if self.state == FIBER_SUSPENDED:
            since = _u64(self.value["block_since"])
            waited = _ms(max(now - since, 0))
            text += "%s for %d ms" % (self._safe_what(), waited)
        if self.flags & FIBER_CANCELLED:
            text += " cancelled"
        if self.flags & FIBER_SHIELDED:
            text += " in cleanup"
        deadline = _u64(self.value["deadline"])
        if deadline != NEVER:
            text += " deadline in %d ms" % _ms(deadline - now)
        if self.name:
            text += ' "%s"' % self.name
        return text

    def _safe_what(self):
        try:
            return self.what()
        except gdb.error as err:  # a wait object gdb cannot read
            return "? (%s)" % err


class Core:
    """One struct core and the gdb thread that runs it, if any."""

    def __init__(self, layout, addr, thread):
        self.layout, self.addr, self.thread = layout, addr, thread
        self.value = gdb.Value(addr).cast(layout.core_ptr).dereference()
        self.index = int(self.value["index"])

    def fibers(self):
        head = _u64(self.value["sched"]["fibers"]["head"].address)
        node, seen = _read_u64(head + 8), 0  # struct dnode { prev, next }
        while node != head:
            seen += 1
            if not node or seen > MAX_FIBERS:
                raise Problem("runtime: core %d: fiber list corrupt "
                              "at 0x%x" % (self.index, node))
            yield Fiber(self.layout, node - self.layout.all_offset, self)
            node = _read_u64(node + 8)

    def header(self, count):
        where = "no thread (not running)"
        if self.thread is not None:
            thread = self.thread
            where = "thread %d (LWP %d)" % (thread.num, thread.ptid[1])
        return "core %d: %d fibers, %d timers armed; %s" % (
            self.index, count, int(self.value["timers"]["armed"]), where)


def runtime_cores(layout, rt, threads):
    value = gdb.Value(rt).cast(layout.rt_ptr).dereference()
    ncores = int(value["ncores"])
    if not 0 < ncores <= MAX_CORES:
        raise Problem("runtime: struct runtime at 0x%x has %d cores: "
                      "not a runtime (or freed)" % (rt, ncores))
    base = _u64(value["cores"])
    size = layout.core_ptr.target().sizeof
    return [Core(layout, base + i * size, threads.get(base + i * size))
            for i in range(ncores)]


def all_cores(layout, expr=None):
    """[(runtime address, [Core])] for every runtime found."""
    rts, threads = find_runtimes(layout, expr)
    return [(rt, runtime_cores(layout, rt, threads)) for rt in rts]


def print_fibers(arg):
    _require_process()
    layout = Layout()
    for rt, cores in all_cores(layout, arg.strip() or None):
        print("runtime 0x%x: %d cores" % (rt, len(cores)))
        for core in cores:
            _print_core(core)


def _print_core(core):
    try:
        fibers = list(core.fibers())
    except gdb.MemoryError as err:
        print("core %d: cannot read its fibers: %s" % (core.index, err))
        return
    print(core.header(len(fibers)))
    now = _u64(core.value["now"])
    for fiber in fibers:
        print(fiber.line(now))


# ------------------------------------------------------------ fiber-bt

def find_fiber(layout, spec):
    """The one fiber named by id, name or 0x address."""
    matches = []
    for _, cores in all_cores(layout):
        for core in cores:
            matches += [f for f in core.fibers() if _matches(f, spec)]
    if not matches:
        raise Problem("runtime: no fiber %s (see: runtime fibers)" % spec)
    if len(matches) > 1:
        ids = ", ".join(str(f.id) for f in matches)
        raise Problem("runtime: %d fibers match %s (ids %s): give "
                      "the id or the address" % (len(matches), spec, ids))
    return matches[0]


def _matches(fiber, spec):
    if spec.lower().startswith("0x"):
        return fiber.addr == _hex(spec)
    if spec.isdigit() and fiber.id == int(spec):
        return True
    return fiber.name == spec


def _hex(spec):
    try:
        return int(spec, 16)
    except ValueError:
        raise Problem("runtime: %s is not an address" % spec) from None


def _arch():
    name = gdb.newest_frame().architecture().name()
    if "x86-64" in name or "x86_64" in name:
        return "x86_64"
    if "aarch64" in name:
        return "aarch64"
    raise Problem("runtime: fiber-bt knows the x86_64 and aarch64 "
                  "switch frames, not %s" % name)


def saved_registers(fiber):
    """{register: value} that runtime__switch will restore for fiber."""
    frame = FRAMES[_arch()]
    sp = _u64(fiber.value["sp"])
    if not sp:
        raise Problem("runtime: fiber %d has no saved context" % fiber.id)
    regs = {name: _read_u64(sp + off) for name, off in frame["saved"]}
    regs[frame["pc"]] = _read_u64(sp + frame["pc_at"])
    regs[frame["sp"]] = sp + frame["sp_after"]
    return regs


def fiber_backtrace(arg):
    _require_process()
    words = arg.split(None, 1)
    if not words:
        raise Problem("usage: runtime fiber-bt ID|NAME|0xADDRESS [BT-ARGS]")
    fiber = find_fiber(Layout(), words[0])
    bt = "bt " + (words[1] if len(words) > 1 else "")
    print(_describe(fiber))
    if fiber.running:
        _running_backtrace(fiber, bt)
    else:
        _suspended_backtrace(fiber, bt)


def _describe(fiber):
    text = fiber.line(_u64(fiber.core.value["now"])).strip().lstrip("* ")
    return "%s, core %d, struct fiber at 0x%x" % (
        text, fiber.core.index, fiber.addr)


def _running_backtrace(fiber, bt):
    """The running fiber's frames are its thread's."""
    if fiber.core.thread is None:
        raise Problem("runtime: fiber %d runs, but no thread of core "
                      "%d was found" % (fiber.id, fiber.core.index))
    print("(running: the backtrace of thread %d)" % fiber.core.thread.num)
    with _KeepSelection():
        fiber.core.thread.switch()
        gdb.execute(bt)


def _suspended_backtrace(fiber, bt):
    regs = saved_registers(fiber)
    with _KeepSelection():
        try:
            borrowed = _Borrowed(regs)
        except gdb.error as err:
            _unwinder_backtrace(regs, bt, err)
            return
        with borrowed:
            gdb.execute(bt)


class _Borrowed:
    """The selected thread takes regs in frame 0 until the with-block
    ends; then each register gets its own value back, also on error."""

    def __init__(self, regs):
        frame = gdb.newest_frame()
        self.saved = {name: _u64(frame.read_register(name)) for name in regs}
        self.written = []
        try:
            for name, value in regs.items():
                _set_register(name, value)
                self.written.append(name)
        except gdb.error:
            self._restore()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._restore()
        return False

    def _restore(self):
        failed = []
        for name in self.written:
            try:
                _set_register(name, self.saved[name])
            except gdb.error:
                failed.append(name)
        self.written = failed
        if failed:
            raise Problem("runtime: could not restore %s: do not "
                          "continue this process" % ", ".join(failed))


def _set_register(name, value):
    gdb.newest_frame().select()  # frame 0: the thread's own registers
    gdb.execute("set var $%s = %d" % (name, value), to_string=True)


# -------------------------------------- fallback: a Python unwinder

class _FiberUnwinder(Unwinder):
    """While regs is set, frame 0 (the thread's own) unwinds to the
    fiber's saved context, so frames 1.. are the fiber's: no register
    is written, which a core file does not allow."""

    def __init__(self):
        super().__init__("runtime-fiber")
        self.regs = None
        self.frame_sp = 0
        self.pc_name = "pc"

    def __call__(self, pending):
        # Nothing here may ask for a frame: gdb is making frame 0.
        if self.regs is None or pending.level() != 0:
            return None
        pc = pending.read_register(self.pc_name)
        info = pending.create_unwind_info(_FrameId(self.frame_sp, pc))
        for name, value in self.regs.items():
            kind = pending.read_register(name).type
            info.add_saved_register(name, gdb.Value(value).cast(kind))
        return info


class _FrameId:
    """What create_unwind_info wants: sp and pc as gdb.Values."""

    def __init__(self, sp, pc):
        self.sp, self.pc = gdb.Value(sp), pc


UNWINDER = _FiberUnwinder() if register_unwinder else None


def _unwinder_backtrace(regs, bt, why):
    if UNWINDER is None or not hasattr(gdb.PendingFrame, "level"):
        raise Problem("runtime: registers cannot be written here (%s) "
                      "and this gdb has no PendingFrame.level: no "
                      "backtrace of a suspended fiber" % why)
    print("(registers cannot be written here: \"%s\"; the frames come "
          "from an unwinder instead, from #1: #0 is the thread's own)"
          % str(why).rstrip("."))
    frame = FRAMES[_arch()]
    UNWINDER.pc_name = frame["pc"]
    UNWINDER.frame_sp = regs[frame["sp"]] - 1  # inner to the fiber's frames
    UNWINDER.regs = regs
    gdb.invalidate_cached_frames()
    try:
        text = gdb.execute(bt, to_string=True)
    finally:
        UNWINDER.regs = None
        gdb.invalidate_cached_frames()
    print(_drop_frame_zero(text), end="")


def _drop_frame_zero(text):
    lines = text.splitlines(True)
    start = next((i for i, l in enumerate(lines) if l.startswith("#1 ")), None)
    return "".join(lines[start:]) if start is not None else text


# ----------------------------------------------------------------- commands

class RuntimePrefix(gdb.Command):
    """Inspect libruntime fibers: runtime fibers, runtime fiber-bt."""

    def __init__(self):
        super().__init__("runtime", gdb.COMMAND_STACK, gdb.COMPLETE_NONE, True)


class FibersCommand(gdb.Command):
    """List every fiber of every core: runtime fibers [RT-EXPRESSION].
A line per fiber as runtime_dump prints it; "*" marks a running one."""

    def __init__(self, name):
        super().__init__(name, gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        _run(print_fibers, arg)


class FiberBacktraceCommand(gdb.Command):
    """Backtrace of one fiber: runtime fiber-bt ID|NAME|0xADDRESS [BT-ARGS].
A suspended fiber's frames start where runtime__switch saved them."""

    def __init__(self):
        super().__init__("runtime fiber-bt", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        _run(fiber_backtrace, arg)


def _run(command, arg):
    """gdb's errors as one line each, without a Python traceback."""
    try:
        command(arg)
    except gdb.MemoryError as err:
        raise Problem("runtime: %s (not a runtime, or freed?)" % err)
    except gdb.error as err:
        raise Problem("runtime: %s" % err)


def _register():
    RuntimePrefix()
    FibersCommand("runtime fibers")
    FibersCommand("info fibers")
    FiberBacktraceCommand()
    if UNWINDER is not None:
        register_unwinder(None, UNWINDER, replace=True)


_register()
