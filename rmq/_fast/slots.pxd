# cython: language_level=3
# An object's fields read and set at their slots' offsets, without the
# attribute protocol (~140 instructions a read): for a plain slots class whose
# field is a writable object slot (``slot_offset`` > 0), the caller falling
# back to the attribute for any other class (and for an unset slot, so that
# errors stay the attribute's).  Shared by the DLedger push and append (an
# ``Entry``'s fields), the reput walk (``ConsumeQueue`` and ``MappedFile``)
# and the pop lane (a ``PopResult``'s).

from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        const char* name
        int type
        Py_ssize_t offset
        int flags
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    int Py_T_OBJECT_EX "T_OBJECT_EX"
    int Py_READONLY "READONLY"


cdef inline Py_ssize_t slot_offset(cls, str name, member_type,
                                   bint with_dict=False) except -2:
    """Where field ``name`` of an instance of ``cls`` lies, when it is a
    writable object slot of a plain slots class (``member_type``:
    ``types.MemberDescriptorType``); else -1.  ``with_dict``: the class may
    also keep an instance dict (a class that slots only its hot fields: the
    slot's member descriptor still decides every read and write of it).  A
    slot a base class declares is found there, as the attribute lookup finds
    it: a subclass's instances keep it at the same offset."""
    cdef PyMemberDef* m
    if type(cls) is not type or cls.__getattribute__ is not object.__getattribute__ or \
            cls.__setattr__ is not object.__setattr__ or \
            (cls.__dictoffset__ != 0 and not with_dict):
        return -1
    d = None
    for base in cls.__mro__:  # where the attribute lookup finds the field's descriptor
        d = base.__dict__.get(name)
        if d is not None:
            break
    if type(d) is not member_type:
        return -1
    m = (<PyMemberDescrObject*><PyObject*>d).d_member
    if m.type != Py_T_OBJECT_EX or m.flags & Py_READONLY or m.offset <= 0:
        return -1
    return m.offset


cdef inline int slot_offsets(cls, tuple names, Py_ssize_t* out, member_type,
                             bint with_dict=False, bint required=False) except -1:
    """``slot_offset`` of each field of ``names`` into ``out`` (as many);
    ``required``: TypeError for the first that is not a plain slot (nothing
    to rely on in ``out`` then)."""
    cdef Py_ssize_t i
    for i in range(len(names)):
        out[i] = slot_offset(cls, <str>names[i], member_type, with_dict)
        if required and out[i] < 0:
            raise TypeError(f"{cls!r}'s field {names[i]} is not a plain slot")
    return 0


cdef inline PyObject* slot_at_offset(object o, Py_ssize_t offset) noexcept:
    """The slot at ``offset`` of ``o`` (borrowed; NULL when unset)."""
    return (<PyObject**>(<char*><PyObject*>o + offset))[0]


cdef inline object slot_value(object o, Py_ssize_t offset, str name):
    """The slot at ``offset`` of ``o`` (``slot_offset`` of its field
    ``name``), or the AttributeError reading an unset one raises."""
    cdef PyObject* v = slot_at_offset(o, offset)
    if v == NULL:
        raise AttributeError(f"{type(o).__name__!r} object has no attribute {name!r}")
    return <object>v


cdef inline void set_slot_at_offset(object o, Py_ssize_t offset, object v) noexcept:
    """Set the slot at ``offset`` of ``o`` to ``v``, as its member
    descriptor's ``__set__`` does (the new value referenced, the old one
    dropped after)."""
    cdef PyObject** at = <PyObject**>(<char*><PyObject*>o + offset)
    cdef PyObject* old = at[0]
    Py_INCREF(v)
    at[0] = <PyObject*>v
    Py_XDECREF(old)


cdef inline object slot_or_attr(object o, Py_ssize_t offset, str name):
    """``o``'s field ``name``: its slot at ``offset`` (``slot_offset`` for
    ``type(o)``) when that is known (> 0) and set, else its attribute."""
    cdef PyObject* v
    if offset > 0:
        v = slot_at_offset(o, offset)
        if v != NULL:
            return <object>v
    return getattr(o, name)


cdef inline int set_slot_or_attr(object o, Py_ssize_t offset, str name, object v) except -1:
    """Set ``o``'s field ``name``: at its slot's ``offset`` when that is
    known (> 0), else through its attribute."""
    if offset > 0:
        set_slot_at_offset(o, offset, v)
    else:
        setattr(o, name, v)
    return 0
